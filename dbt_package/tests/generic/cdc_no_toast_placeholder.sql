{#
  Fails for rows where a string column holds Debezium's unchanged-TOAST placeholder: silver must
  keep the previous value, never write the placeholder.
#}
{% test cdc_no_toast_placeholder(model, placeholder='__debezium_unavailable_value') %}
select *
from {{ cdc_lakehouse.cdc_tested_rows(model) }}
where {{ cdc_lakehouse.cdc_placeholder_predicate(model, placeholder) }}
{% endtest %}
