{#
  What a view, a table model and a seed were last built from (their fingerprint, a table
  property: `cdc.view.fingerprint`, `cdc.build.fingerprint`), shared by the view, table and seed
  materializations, which leave a relation alone when the fingerprint it would get is the one
  it has.
#}

{#- What a DDL carries until its fingerprint, a digest of the DDL itself, is known. -#}
{% macro sparksession_fingerprint_placeholder() %}
  {{- return('@cdc_build_fingerprint@') -}}
{% endmacro %}


{#- The value of `property` that `relation` (from dbt's cache: listed when the run started)
    had then, or none. -#}
{% macro sparksession_stored_fingerprint(relation, property) %}
  {%- set pattern = property | replace('.', '[.]') ~ '=([0-9a-f]{32})' -%}
  {%- set found = modules.re.findall(pattern, relation.information or '') if relation is not none else [] -%}
  {{ return(found[0] if found | length == 1 else none) }}
{% endmacro %}
