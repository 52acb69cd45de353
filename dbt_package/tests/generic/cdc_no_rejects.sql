{#
  Fails (or warns: var `cdc_rejects_severity`, default warn) when a bronze model holds rejected
  landing lines; each failing row names the file, line and reason.
#}
{% test cdc_no_rejects(model) %}
{{ config(severity=var('cdc_rejects_severity', 'warn')) }}

select
    _cdc_file,
    _cdc_line,
    _cdc_reject_reason
from {{ model }}
where _cdc_reject_reason is not null
{% endtest %}
