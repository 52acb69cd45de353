{#- Fails for rows flagged deleted in a silver table that runs in hard-delete mode. -#}
{% test cdc_hard_deletes_removed(model) %}
select *
from {{ model }}
where _cdc_is_deleted
{% endtest %}
