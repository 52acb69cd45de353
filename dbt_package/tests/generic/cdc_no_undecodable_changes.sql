{#
  Fails (or warns: var `cdc_undecodable_severity`, default error) when a bronze model rejected a
  change event it could read, because a value did not decode as its column's type (schemas off: a
  type changed at the source before its column's declaration). Silver would keep that key's older
  state; failing here skips it and what follows. Each failing row names the file, line and reason.
#}
{% test cdc_no_undecodable_changes(model) %}
{{ config(severity=var('cdc_undecodable_severity', 'error')) }}

select
    _cdc_file,
    _cdc_line,
    _cdc_reject_reason
from {{ model }}
where _cdc_reject_reason like 'cannot decode %'
{% endtest %}
