{#
  Fails for rows of a hard-delete silver table that should be gone: flagged deleted, or older
  than a delete of their key or a truncate in the change log the table has applied (loaded at or
  before its watermark). A resurrected row, the bug this project exists to prevent, fails it.
#}
{% test cdc_hard_deletes_removed(model) %}
    {{ cdc_lakehouse.cdc_rows_deleted_at_source(model) }}
{% endtest %}
