{#- Fails for every combination of `combination_of_columns` that occurs more than once. -#}
{% test unique_combination_of_columns(model, combination_of_columns) %}
select
    {{ cdc_lakehouse.cdc_column_list(combination_of_columns) }},
    count(*) as occurrences
from {{ model }}
group by {{ cdc_lakehouse.cdc_column_list(combination_of_columns) }}
having count(*) > 1
{% endtest %}
