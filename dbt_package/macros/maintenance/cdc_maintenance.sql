{#
  Table maintenance as dbt operations. Iceberg: through Iceberg's Spark procedures
  (`call <catalog>.system.<procedure>`; the embedded profile's Iceberg catalog is `spark_catalog`).
  Delta (CDC_TABLE_FORMAT=delta): OPTIMIZE, REORG ... APPLY (PURGE) and VACUUM, the same jobs
  under Delta's names (each macro says which). Hudi (CDC_TABLE_FORMAT=hudi): its clustering and
  cleaning procedures (`call run_clustering`, `call run_clean`). Every operation takes `tables` (a list of
  `schema.table` names) or `models` (a list of model names: their tables, side tables included)
  and otherwise acts on every table the project builds (models materialized as table or incremental, plus the
  `<silver>__cdc_tombstones` tables beside silver models and the `<bronze>__cdc_loaded_files`
  tables beside bronze models; those that exist):

    dbt run-operation cdc_compact
    dbt run-operation cdc_compact --args '{tables: [silver.customers]}'
    dbt run-operation cdc_compact --args '{models: [customers, customers_history]}'
    dbt run-operation cdc_expire_snapshots --args '{older_than: "2024-06-01 00:00:00", retain_last: 5}'
    dbt run-operation cdc_remove_orphan_files --args '{dry_run: true}'

  Run them when no `dbt build` writes the same tables (Iceberg retries conflicting commits, but a
  compaction racing a merge wastes the work of one of them).
#}

{#- `schema.table` names of the project's tables that exist (of the models named in `models`
    only, when given), or `tables` as given. -#}
{% macro cdc_maintenance_tables(tables=none, models=none) %}
    {%- if tables is not none -%}
        {{ return([tables] if tables is string else tables) }}
    {%- endif -%}
    {%- set models = [models] if models is string else models -%}
    {%- set found = [] -%}
    {%- set named = [] -%}
    {%- for node in graph.nodes.values() -%}
        {%- set materialized = node.config.get('materialized') -%}
        {%- if node.resource_type == 'model' and materialized in ('table', 'incremental')
            and (models is none or node.name in models)
            and node.config.get('file_format') in ('iceberg', 'delta', 'hudi') -%}
            {%- do named.append(node.name) -%}
            {%- set names = [node.alias] -%}
            {%- if node.config.get('incremental_strategy') == 'cdc_merge' -%}
                {%- do names.append(node.alias ~ '__cdc_tombstones') -%}
            {%- endif -%}
            {%- if 'cdc_bronze' in node.tags -%}
                {%- do names.append(node.alias ~ '__cdc_loaded_files') -%}
            {%- endif -%}
            {%- for name in names -%}
                {%- if adapter.get_relation(node.database, node.schema, name) is not none -%}
                    {%- do found.append(node.schema ~ '.' ~ name) -%}
                {%- endif -%}
            {%- endfor -%}
        {%- endif -%}
    {%- endfor -%}
    {%- set unknown = (models or []) | reject('in', named) | list -%}
    {%- if unknown -%}
        {{ exceptions.raise_compiler_error("models: " ~ unknown | join(', ') ~ ": no table or incremental model of the project has that name") }}
    {%- endif -%}
    {{ return(found) }}
{% endmacro %}


{#- Run one procedure call and log its result row (counts of files and bytes it touched). -#}
{% macro cdc_call_procedure(table, call) %}
    {%- set result = run_query(call) -%}
    {%- set parts = [] -%}
    {%- if result is not none and result.rows | length > 0 -%}
        {%- for name in result.column_names -%}
            {%- do parts.append(name ~ '=' ~ result.rows[0][loop.index0]) -%}
        {%- endfor -%}
    {%- endif -%}
    {{ log(table ~ ': ' ~ (parts | join(', ') or 'done'), info=True) }}
    {{ return(result) }}
{% endmacro %}


{#
  Compaction: rewrite small data files, and data files that merge-on-read deletes point at,
  into files of `target_file_size_mb` (default: the table's `write.target-file-size-bytes`,
  512 MiB); then rewrite the position-delete files still needed and drop the dangling ones. A
  merge-on-read table reads as fast as a freshly written one afterwards.
  Delta: OPTIMIZE (bin-packing small files into files of `target_file_size_mb`, default Delta's
  1 GiB), then REORG TABLE ... APPLY (PURGE), which rewrites the files that deletion vectors
  (Delta's merge-on-read deletes) point at.
#}
{% macro cdc_compact(tables=none, target_file_size_mb=none, catalog='spark_catalog', models=none) %}
    {%- if cdc_lakehouse.cdc_table_format() == 'hudi' -%}
        {#- Hudi: clustering bin-packs the small files of every file group into files of
            `target_file_size_mb` (default Hudi's 1 GiB). The project's Hudi tables are
            copy-on-write: no delete files or logs to fold in. -#}
        {%- set options = ["hoodie.clustering.plan.strategy.small.file.limit=" ~ ((target_file_size_mb or 1024) * 1048576) | int,
                           "hoodie.clustering.plan.strategy.target.file.max.bytes=" ~ ((target_file_size_mb or 1024) * 1048576) | int] -%}
        {%- for table in cdc_lakehouse.cdc_maintenance_tables(tables, models) -%}
            {%- set result = run_query("call run_clustering(table => '" ~ table ~ "', options => '" ~ options | join(',') ~ "')") -%}
            {{ log(table ~ ': clustering ' ~ (result.rows | length) ~ ' plan(s) run', info=True) }}
        {%- endfor -%}
        {{ return('') }}
    {%- endif -%}
    {%- if cdc_lakehouse.cdc_table_format() == 'delta' -%}
        {%- if target_file_size_mb is not none -%}
            {%- do run_query("set spark.databricks.delta.optimize.maxFileSize = " ~ (target_file_size_mb * 1048576) | int) -%}
        {%- endif -%}
        {%- for table in cdc_lakehouse.cdc_maintenance_tables(tables, models) -%}
            {%- set result = run_query("optimize " ~ table) -%}
            {%- set metrics = result.rows[0]['metrics'] if result.rows | length > 0 else none -%}
            {{ log(table ~ ': optimize ' ~ (metrics | string if metrics is not none else 'done'), info=True) }}
            {%- do run_query("reorg table " ~ table ~ " apply (purge)") -%}
            {{ log(table ~ ': reorg apply (purge) done', info=True) }}
        {%- endfor -%}
        {{ return('') }}
    {%- endif -%}
    {%- set options = ["'min-input-files', '2'", "'delete-file-threshold', '1'", "'remove-dangling-deletes', 'true'"] -%}
    {%- if target_file_size_mb is not none -%}
        {%- do options.append("'target-file-size-bytes', '" ~ (target_file_size_mb * 1048576) | int ~ "'") -%}
    {%- endif -%}
    {%- for table in cdc_lakehouse.cdc_maintenance_tables(tables, models) -%}
        {%- do cdc_lakehouse.cdc_call_procedure(table, "call " ~ catalog ~ ".system.rewrite_data_files(table => '"
            ~ table ~ "', options => map(" ~ options | join(', ') ~ "))") -%}
        {%- do cdc_lakehouse.cdc_call_procedure(table, "call " ~ catalog ~ ".system.rewrite_position_delete_files(table => '"
            ~ table ~ "', options => map('rewrite-all', 'true'))") -%}
    {%- endfor -%}
{% endmacro %}


{#
  Forget snapshots older than `older_than` (a timestamp string; default: Iceberg's, 5 days),
  keeping at least the last `retain_last`, and delete the files only they referenced. Time
  travel to an expired snapshot is no longer possible.
  Delta: VACUUM, which deletes the files no version newer than `older_than` needs (default:
  Delta's 7 days; `retain_last` has no Delta equivalent: the log keeps versions for the table's
  `delta.logRetentionDuration`). See cdc_delta_vacuum.
#}
{% macro cdc_expire_snapshots(tables=none, older_than=none, retain_last=1, catalog='spark_catalog', models=none) %}
    {%- if cdc_lakehouse.cdc_table_format() == 'hudi' -%}
        {#- Hudi: the cleaner deletes the file versions that no retained commit reads: those
            older than `older_than` (KEEP_LATEST_BY_HOURS), else all but the last
            `retain_last` commits' (KEEP_LATEST_COMMITS). -#}
        {%- if older_than is not none -%}
            {%- set hours = run_query("select cast(ceil((unix_timestamp(current_timestamp()) - unix_timestamp(timestamp '" ~ older_than ~ "')) / 3600) as bigint)").rows[0][0] -%}
            {%- set args = "clean_policy => 'KEEP_LATEST_BY_HOURS', hours_retained => " ~ ([hours, 1] | max) -%}
        {%- else -%}
            {%- set args = "clean_policy => 'KEEP_LATEST_COMMITS', retain_commits => " ~ ([retain_last, 1] | max) -%}
        {%- endif -%}
        {%- for table in cdc_lakehouse.cdc_maintenance_tables(tables, models) -%}
            {%- do cdc_lakehouse.cdc_call_procedure(table, "call run_clean(table => '" ~ table ~ "', " ~ args ~ ")") -%}
        {%- endfor -%}
        {{ return('') }}
    {%- endif -%}
    {%- if cdc_lakehouse.cdc_table_format() == 'delta' -%}
        {%- do cdc_lakehouse.cdc_delta_vacuum(tables, older_than, false, models) -%}
        {{ return('') }}
    {%- endif -%}
    {%- for table in cdc_lakehouse.cdc_maintenance_tables(tables, models) -%}
        {%- set args = ["table => '" ~ table ~ "'", "retain_last => " ~ retain_last] -%}
        {%- if older_than is not none -%}
            {%- do args.append("older_than => timestamp '" ~ older_than ~ "'") -%}
        {%- endif -%}
        {%- do cdc_lakehouse.cdc_call_procedure(table, "call " ~ catalog ~ ".system.expire_snapshots(" ~ args | join(', ') ~ ")") -%}
    {%- endfor -%}
{% endmacro %}


{#
  Delete files in a table's folder that no snapshot references (left by failed or killed
  writes) and that are older than `older_than` (default: Iceberg's, 3 days; files younger than
  that may belong to a write in progress, and Iceberg refuses anything under 24 hours).
  `dry_run: true` only lists them.
  Delta: VACUUM too (it removes unreferenced files, a failed write's included), `DRY RUN` when
  `dry_run`.
#}
{% macro cdc_remove_orphan_files(tables=none, older_than=none, dry_run=false, catalog='spark_catalog', models=none) %}
    {%- if cdc_lakehouse.cdc_table_format() == 'hudi' -%}
        {{ exceptions.raise_compiler_error("cdc_remove_orphan_files: Hudi has no such procedure, and needs none: "
            ~ "a failed write's files are rolled back by Hudi on the next write to the table, and "
            ~ "superseded files are removed by its cleaner (dbt run-operation cdc_expire_snapshots)") }}
    {%- endif -%}
    {%- if cdc_lakehouse.cdc_table_format() == 'delta' -%}
        {%- do cdc_lakehouse.cdc_delta_vacuum(tables, older_than, dry_run, models) -%}
        {{ return('') }}
    {%- endif -%}
    {%- for table in cdc_lakehouse.cdc_maintenance_tables(tables, models) -%}
        {%- set args = ["table => '" ~ table ~ "'", "dry_run => " ~ (dry_run | string | lower)] -%}
        {%- if older_than is not none -%}
            {%- do args.append("older_than => timestamp '" ~ older_than ~ "'") -%}
        {%- endif -%}
        {%- set result = run_query("call " ~ catalog ~ ".system.remove_orphan_files(" ~ args | join(', ') ~ ")") -%}
        {{ log(table ~ ': ' ~ (result.rows | length) ~ ' orphan file(s) ' ~ ('found' if dry_run else 'removed'), info=True) }}
    {%- endfor -%}
{% endmacro %}


{#
  Delta's VACUUM of every table: files no longer referenced by a version younger than
  `older_than` (default: the table's `delta.deletedFileRetentionDuration`, 7 days) are deleted,
  or listed when `dry_run`. Delta refuses a retention under 7 days unless
  spark.databricks.delta.retentionDurationCheck.enabled is false (a younger file may belong to
  a write in progress, or to a reader's version): that check stays on here, so `older_than`
  must be a week old or more unless the session turns it off.
#}
{% macro cdc_delta_vacuum(tables, older_than, dry_run, models=none) %}
    {%- set retain = '' -%}
    {%- if older_than is not none -%}
        {%- set hours = run_query("select cast(ceil((unix_timestamp(current_timestamp()) - unix_timestamp(timestamp '" ~ older_than ~ "')) / 3600) as bigint)").rows[0][0] -%}
        {%- set retain = ' retain ' ~ ([hours, 0] | max) ~ ' hours' -%}
    {%- endif -%}
    {%- for table in cdc_lakehouse.cdc_maintenance_tables(tables, models) -%}
        {%- set result = run_query("vacuum " ~ table ~ retain ~ (" dry run" if dry_run else "")) -%}
        {{ log(table ~ ': vacuum' ~ retain ~ (': ' ~ (result.rows | length) ~ ' file(s) would be deleted' if dry_run else ' done'), info=True) }}
    {%- endfor -%}
{% endmacro %}
