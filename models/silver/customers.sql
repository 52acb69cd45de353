{{ config(unique_key=['customer_id'], cdc_delete_mode='soft') }}

{{ cdc_current_state(ref('stg_northwind__customers_changes')) }}
