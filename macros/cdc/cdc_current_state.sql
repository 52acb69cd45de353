{#
  Body of a silver current-state model:
  `{{ cdc_current_state(ref('stg_<source>__<entity>_changes'), unique_key=[...], delete_mode='hard') }}`
  It sets the model's `unique_key` and `cdc_delete_mode` config for the cdc_merge strategy.
  Full build: resolves the whole change log into one row per key. Incremental run: resolves only
  changes loaded since the table's watermark against the current rows; the `cdc_merge` strategy
  then applies the result.
#}
{% macro cdc_current_state(changes, unique_key, delete_mode=none) %}
    {%- set keys = [unique_key] if unique_key is string else unique_key -%}
    {%- set mode = delete_mode or var('cdc_delete_mode', 'hard') -%}
    {{ config(unique_key=keys, cdc_delete_mode=mode) }}
    {{ return(adapter.dispatch('cdc_current_state', 'cdc_lakehouse')(changes, keys, mode)) }}
{% endmacro %}


{% macro default__cdc_current_state(changes, keys, delete_mode) %}
{%- set attributes = cdc_source_column_names(changes) | reject('in', keys) | list -%}
{%- if is_incremental() %}
    {#- `this` is missing only in a unit test on a fresh warehouse: assume the batch's columns. -#}
    {%- set target_attributes = cdc_source_column_names(this, keys + attributes) | reject('in', keys) | list -%}
    {%- set new_changes -%}
        (
            select *
            from {{ changes }}
            where _cdc_loaded_at > {{ cdc_watermark(this) }}
        )
    {%- endset -%}
    {{ cdc_resolve_batch(
        new_changes, keys, attributes,
        target=this,
        target_attribute_columns=target_attributes,
        tombstones=cdc_tombstones_query(this, keys),
    ) }}
{%- else %}
    {%- set resolved = cdc_resolve_batch(changes, keys, attributes) -%}
    select
        {%- for column in keys + attributes + cdc_silver_columns() %}
        {{ adapter.quote(column) }}{{ "," if not loop.last }}
        {%- endfor %}
    from (
        {{ resolved }}
    ) as resolved
    where _cdc_action = 'upsert'{{ " or _cdc_action = 'delete'" if delete_mode == 'soft' }}
{%- endif %}
{% endmacro %}
