"""The table registry (tables/*.yml), the files generated from it, and the generator that
onboards a database from a live PostgreSQL or a landing zone.

What a user does: append an entry and run `make tables`; edit an entry; remove one; run
`from-postgres` against their database (tables with and without primary keys, types of every
kind, comments) or `from-landing` against their bucket. The end-to-end build of a generated
project against PostgreSQL is the many-tables benchmark (`python -m benchmarks.many_tables`,
run small in test_benchmarks.py)."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from lakehouse import REPO, SAMPLE, SAMPLE_SOURCES, SAMPLE_TABLES, source_of

from cdc_lakehouse.bronze.decode import connect_encoding, declared_encoding
from cdc_lakehouse.bronze.layout import Layout, TopicFiles
from cdc_lakehouse.bronze.spec import TableSpec, spark_type
from cdc_lakehouse.runner import changed, parsed
from cdc_lakehouse.tables import discover, registry
from cdc_lakehouse.tables.__main__ import main
from cdc_lakehouse.tables.generate import MARK, check, outputs, write
from devstack.pg import TemporaryPostgres
from sample.generator import northwind


def test_generated_files_are_in_sync_with_the_registry() -> None:
    assert check(REPO) == []


def test_registry_agrees_with_the_sample_source() -> None:
    """tables/northwind.yml and tables/pagila.yml describe the sample's PostgreSQL tables (the
    Pagila one as its query and transforms shape it): same keys, every column (those added
    mid-stream too) with a type that decodes to the same Spark type."""
    for source, tables in SAMPLE_SOURCES.items():
        registered = {t.name: t for t in registry.tables(REPO) if t.source == source}
        assert set(registered) == {t.name for t in tables}, source
    for table in SAMPLE_TABLES:
        entry = registry.table(REPO, table.name, source_of(table))
        assert entry.key == table.key, table.name
        assert entry.shape == table.shape, table.name
        assert entry.spec.layout == Layout.from_config(table.layout_settings), table.name
        declared = {c.name: spark_type(c.type) for c in entry.columns}
        source = {c.name: spark_type(c.pg_type) for c in table.columns}
        assert declared == source, table.name


def project_with(tmp_path: Path, registry_text: str) -> Path:
    project = tmp_path / "project"
    (project / "tables").mkdir(parents=True)
    (project / "tables" / "shop.yml").write_text(registry_text)
    return project


SHOP = """\
source: shop
landing:
  topic_prefix: shop.public
tables:
  accounts:
    key: [id]
    columns:
      id: int
      name: text
"""

# What docs/tables.md, "Add a table" asks of a user: one entry.
INVOICES = """\
  invoices:
    key: [invoice_id, line]
    delete_mode: soft
    history: {ignore_columns: [touched_at]}
    columns:
      invoice_id: bigint
      line: int
      amount: {type: 'numeric(12,2)', description: Amount of the line.}
      touched_at: timestamptz
"""


def test_add_edit_and_remove_a_table(tmp_path: Path) -> None:
    project = project_with(tmp_path, SHOP)
    gold = project / "models" / "gold" / "by_hand.sql"
    gold.parent.mkdir(parents=True)
    gold.write_text("select 1 as one\n")
    written, _ = write(project)
    assert check(project) == []

    # Adding a table: one entry, one command; only its files and the shared ones change.
    registry_file = project / "tables" / "shop.yml"
    registry_file.write_text(SHOP + INVOICES)
    assert "models/silver/invoices.sql: missing" in check(project)
    added, deleted = write(project)
    assert deleted == []
    own = {p for p in added if "invoices" in p}
    assert own == {
        "python_models/bronze/shop/bronze_shop__invoices.py",
        "models/staging/shop/stg_shop__invoices_changes.sql",
        "models/silver/invoices.sql",
        "models/silver/history/invoices_history.sql",
    }
    assert set(added) - own <= {o.path for o in outputs(project) if "/_shop__" in o.path} | {
        "models/staging/cdc_rejects.sql"
    }
    silver = (project / "models/silver/invoices.sql").read_text()
    assert "unique_key=['invoice_id', 'line']" in silver and "delete_mode='soft'" in silver
    history = (project / "models/silver/history/invoices_history.sql").read_text()
    assert "ignore_columns=['touched_at']" in history
    rejects = (project / "models/staging/cdc_rejects.sql").read_text()
    assert "ref('bronze_shop__accounts')" in rejects and "ref('bronze_shop__invoices')" in rejects
    bronze = yaml.safe_load((project / "python_models/bronze/shop/_shop__bronze.yml").read_text())
    config = {m["name"]: m["config"]["cdc_table"] for m in bronze["models"]}
    assert config["bronze_shop__invoices"] == {
        "name": "invoices",
        "topic_prefix": "shop.public",
        "key": ["invoice_id", "line"],
        "columns": {
            "invoice_id": "bigint",
            "line": "int",
            "amount": "numeric(12,2)",
            "touched_at": "timestamptz",
        },
    }
    docs = (project / "models/staging/shop/_shop__columns.md").read_text()
    assert "{% docs shop_invoices__amount %}\nAmount of the line.\n{% enddocs %}" in docs

    # A hand edit of a generated file is caught; generate puts it back.
    silver_file = project / "models/silver/invoices.sql"
    silver_file.write_text(silver.replace("'soft'", "'hard'"))
    assert check(project) == [
        "models/silver/invoices.sql: differs from the registry (stale, or edited by hand)"
    ]
    write(project)
    assert silver_file.read_text() == silver

    # History off, then the table removed: its files go, hand-written ones stay.
    registry_file.write_text(
        SHOP + INVOICES.replace("history: {ignore_columns: [touched_at]}", "history: false")
    )
    _, deleted = write(project)
    assert deleted == ["models/silver/history/invoices_history.sql"]
    registry_file.write_text(SHOP)
    assert (
        "python_models/bronze/shop/bronze_shop__invoices.py: "
        "generated for a table no longer in the registry" in check(project)
    )
    _, deleted = write(project)
    assert "models/silver/invoices.sql" in deleted
    assert not list(project.rglob("*invoices*"))
    assert gold.read_text() == "select 1 as one\n"
    assert check(project) == []

    # A hand-written model with a generated model's name is never overwritten.
    (project / "models/silver/orders.sql").write_text("select 1 as id\n")
    registry_file.write_text(SHOP + "  orders:\n    key: [id]\n")
    with pytest.raises(
        FileExistsError, match="models/silver/orders.sql exists and was not generated"
    ):
        write(project)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("  t:\n    columns: {id: int}\n", "tables.t: `key` (the primary-key columns) is required"),
        ("  t:\n    key: [id]\n    keys: [id]\n", "tables.t: unknown setting(s) ['keys']"),
        ("  t:\n    key: [id]\n    delete_mode: purge\n", "delete_mode must be one of"),
        ("  t:\n    key: [id]\n    columns: {x: int}\n", "key column(s) ['id'] are not among"),
        ("  t:\n    key: [id]\n    columns: {id: integr}\n", "unknown column type 'integr'"),
        ("  T:\n    key: [id]\n", "a table name is lower-case"),
        ("  t:\n    key: [id]\n    topic_prefix: ''\n", "no topic: set `topic:`"),
        ("  t:\n    key: [id]\n    shape: debezium\n", "shape must be one of"),
        ("  t:\n    key: [id]\n    history: {ignore: [a]}\n", "history: unknown setting(s)"),
        ("  t:\n    key: [id]\n  t_history:\n    key: [id]\n    history: false\n", None),
        (
            "  a:\n    key: [id]\n  b:\n    key: [id]\n    model: a\n",
            "tables.b: its silver model a is also the silver model of the entry `a`",
        ),
    ],
)
def test_a_malformed_entry_is_named_with_its_file(
    tmp_path: Path, entry: str, message: str | None
) -> None:
    project = project_with(
        tmp_path, "source: shop\nlanding: {topic_prefix: shop}\ntables:\n" + entry
    )
    if message is None:
        # `t_history` the table and `t`'s history model share a name: caught, not overwritten
        with pytest.raises(
            registry.RegistryError,
            match="its silver model t_history is also the history model of the entry `t`",
        ):
            registry.load(project)
        return
    with pytest.raises(registry.RegistryError) as error:
        registry.load(project)
    assert str(project / "tables" / "shop.yml") in str(error.value)
    assert message in str(error.value)


def project_with_the_sample(tmp_path: Path) -> Path:
    """A user's project: the bundled sample's registry (northwind, pagila) and a gold model."""
    project = tmp_path / "project"
    shutil.copytree(REPO / "tables", project / "tables")
    gold = project / "models" / "gold" / "fct_sales.sql"
    gold.parent.mkdir(parents=True)
    gold.write_text("select 1 as id\n")
    return project


def test_a_table_named_like_a_model_is_registered_under_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A user's source has a table named like one of the sample's (`address`: Pagila's,
    `customers`: Northwind's) or like a hand-written model: the writers name its models
    `<source>_<table>` and say so, and `make tables` then generates without a clash."""
    project = project_with_the_sample(tmp_path)
    landing = tmp_path / "landing"
    shutil.copytree(SAMPLE / "landing", landing)
    args = ["--project", str(project), "from-landing", "--source", "crm", "--root", str(landing)]
    assert main([*args, "--include", "*customers", "--key", "customers=customer_id"]) == 0
    out = capsys.readouterr().out
    assert "1 table(s) added: customers" in out
    assert (
        "note    customers: registered with `model: crm_customers` (models crm_customers, "
        "crm_customers_history): `customers` is taken by tables/northwind.yml, entry "
        "`customers`"
    ) in out

    # What `from-postgres` found, through the function both commands write with.
    def found(name: str) -> tuple[discover.Found, None]:
        return discover.Found(name, ["id"], [("id", "int", None), ("city", "text", None)]), None

    report = discover.Report()
    discover.add_to_registry(
        project / "tables" / "mydb.yml",
        "mydb",
        # `address` twice: the second from another schema of the same source
        [found(n) for n in ("address", "fct_sales", "stores", "address_history", "address")],
        landing={"topic_prefix": "mydb.public"},
        description=None,
        delete_mode=None,
        report=report,
    )
    assert report.added == ["address", "fct_sales", "stores"]
    assert report.notes == [
        "address: registered with `model: mydb_address` (models mydb_address, "
        "mydb_address_history): `address` is taken by tables/pagila.yml, entry `address`",
        "fct_sales: registered with `model: mydb_fct_sales` (models mydb_fct_sales, "
        "mydb_fct_sales_history): `fct_sales` is taken by models/gold/fct_sales.sql",
    ]
    assert report.skipped == [
        # Pagila's history model, and so is the name this source's `address` history took
        "address_history: `address_history` is taken by tables/pagila.yml, entry `address`, "
        "and so is mydb_address_history: add its entry by hand with a `model:` of your choice",
        "address: a table of that name is added already (from another schema); register this "
        "one in a source of its own (--source)",
    ]
    models = {t.name: t.silver_model for t in registry.load(project)[1].tables}
    assert models == {"address": "mydb_address", "fct_sales": "mydb_fct_sales", "stores": "stores"}
    assert (
        "    model: mydb_address  # `address` is taken by tables/pagila.yml, entry `address`\n"
        in (project / "tables" / "mydb.yml").read_text()
    )

    write(project)  # no clash
    assert check(project) == []
    silver = {p.stem for p in (project / "models" / "silver").glob("*.sql")}
    assert {"address", "customers", "crm_customers", "mydb_address", "stores"} <= silver
    assert (project / "models/silver/history/mydb_address_history.sql").exists()
    assert (project / "python_models/bronze/mydb/bronze_mydb__address.py").exists()


def test_a_model_clash_names_both_entries_and_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An entry written by hand with the name of another source's table stops `make tables`:
    the error names both entries and the `model:` that fixes it."""
    project = project_with_the_sample(tmp_path)
    mydb = project / "tables" / "mydb.yml"
    mydb.write_text(
        "source: mydb\nlanding: {topic_prefix: mydb.public}\ntables:\n"
        "  address:\n    key: [address_id]\n"
    )
    assert main(["--project", str(project), "generate"]) == 2
    error = capsys.readouterr().err
    pagila = project / "tables" / "pagila.yml"
    assert error == (
        f"error: {pagila}: tables.address: its silver model address is also the silver model "
        f"of the entry `address` in {mydb}: two entries cannot generate one model; set "
        "`model:` on one of them to name its silver model (e.g. `model: mydb_address` in the "
        f"entry of `address` in {mydb} or `model: pagila_address` in the entry of `address` "
        f"in {pagila})\n"
    )
    assert not (project / "models").joinpath("silver").exists()
    mydb.write_text(mydb.read_text() + "    model: mydb_address\n")
    assert main(["--project", str(project), "generate"]) == 0
    assert check(project) == []


SHOP_DDL = """
create schema app;
create type app.mood as enum ('ok', 'meh');
create domain app.year as integer check (value >= 1901);
create domain app.recent_year as app.year check (value >= 2000);
create domain app.price as numeric(10,2) check (value >= 0);
create domain app.sale_price as app.price;
create table app.customers (
    id int primary key,
    name varchar(40) not null,
    code char(2),
    credit numeric(12,2),
    ratio numeric,
    tags text[],
    scores int[],
    profile jsonb,
    external_id uuid,
    photo bytea,
    born date,
    opens time,
    created_at timestamptz,
    updated_at timestamp(3),
    active boolean,
    big bigint,
    small smallint,
    weight real,
    height double precision,
    mood app.mood,
    idle interval,
    ip inet,
    opens_at timetz,
    fee money,
    flag bit,
    flags bit(3),
    mask varbit(5),
    ref oid,
    since app.year,
    recent app.recent_year,
    list_price app.sale_price,
    good_years app.year[]
);
comment on table app.customers is 'People who buy.';
comment on column app.customers.credit is 'Credit limit, in euros.';
create table app.order_lines (order_id bigint, line int, qty int, primary key (order_id, line));
create table app.audit_log (at timestamptz, what text);
create table app.tmp_scratch (id int primary key);
create table other.ignored (id int primary key);
"""


@pytest.fixture(scope="module")
def shop_pg() -> TemporaryPostgres:
    with TemporaryPostgres("shop") as pg:
        with pg.connect(autocommit=True) as conn:
            conn.execute("create schema other")
            conn.execute(SHOP_DDL)
        yield pg


@pytest.mark.system
def test_from_postgres_registers_a_schema(
    shop_pg: TemporaryPostgres, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    base = ["--project", str(project), "from-postgres", "--source", "app"]
    pg_args = ["--dsn", shop_pg.conninfo(), "--schema", "app", "--exclude", "tmp_*"]
    assert main([*base, *pg_args]) == 0
    out = capsys.readouterr().out
    assert "2 table(s) added: customers, order_lines" in out
    assert "skipped audit_log: no primary key; give one with --key audit_log=col1,col2" in out
    for column in ("mood", "ip"):
        assert f"customers.{column}: type " in out and "is read as text" in out
    assert "customers.idle: type interval is declared bigint: microseconds" in out
    assert "customers.mask: type bit varying(5) is read as bytes: Debezium's bits" in out
    assert "customers.good_years: an array of a domain type, which Debezium leaves out" in out
    assert "customers.since" not in out and "customers.list_price" not in out

    [source] = registry.load(project)
    tables = {t.name: t for t in source.tables}
    assert set(tables) == {"customers", "order_lines"}  # tmp_* excluded, other schema not read
    customers = tables["customers"]
    assert customers.topic == "app.app.customers"  # Debezium: <topic.prefix>.<schema>.<table>
    assert customers.key == ("id",) and tables["order_lines"].key == ("order_id", "line")
    assert customers.description == "People who buy."
    types = {c.name: c.type for c in customers.columns}
    assert types == {
        "id": "integer",
        "name": "character varying(40)",
        "code": "character(2)",
        "credit": "numeric(12,2)",
        "ratio": "numeric",
        "tags": "text[]",
        "scores": "integer[]",
        "profile": "jsonb",
        "external_id": "uuid",
        "photo": "bytea",
        "born": "date",
        "opens": "time",
        "created_at": "timestamp with time zone",
        "updated_at": "timestamp(3) without time zone",
        "active": "boolean",
        "big": "bigint",
        "small": "smallint",
        "weight": "real",
        "height": "double precision",
        "mood": "text",
        "idle": "bigint",
        "ip": "text",
        # what Debezium writes for them (see test_decode's ODD_TYPES)
        "opens_at": "timetz",
        "fee": "numeric(38,2)",
        "flag": "boolean",
        "flags": "bit(3)",
        "mask": "bit varying(5)",
        "ref": "bigint",
        # domains: their base type, through domains over domains, with the domain's modifier
        "since": "integer",
        "recent": "integer",
        "list_price": "numeric(10,2)",
        "good_years": "integer[]",
    }
    # ...which is how Debezium writes them: these are the schema fields Debezium 3.6.3 wrote for
    # such domain columns in a real capture (snapshot and streaming alike). The declared type
    # must decode, schemas off, what Debezium encodes, into the type the embedded schema gives.
    debezium = {
        "since": {"type": "int32", "optional": True, "field": "since"},
        "recent": {"type": "int32", "optional": True, "field": "recent"},
        "list_price": {
            "type": "bytes",
            "optional": True,
            "name": "org.apache.kafka.connect.data.Decimal",
            "version": 1,
            "parameters": {"scale": "2", "connect.decimal.precision": "10"},
            "field": "list_price",
        },
    }
    spec = TableSpec(topic="app.app.customers", key=("id",), columns=types)
    for name, field in debezium.items():
        as_declared = (declared_encoding(types[name], spec), spark_type(types[name]))
        assert as_declared == connect_encoding(field), name
    spark = {name: spark_type(t) for name, t in types.items()}
    assert spark["created_at"] == "timestamp" and spark["updated_at"] == "timestamp_ntz"
    assert spark["credit"] == "decimal(12,2)" and spark["scores"] == "array<int>"
    credit = next(c for c in customers.columns if c.name == "credit")
    assert credit.description == "Credit limit, in euros."

    # Generated files follow; the registry file is the user's to edit from here on.
    write(project)
    assert check(project) == []
    path = project / "tables" / "app.yml"
    path.write_text(
        path.read_text().replace(
            "    key: [order_id, line]\n", "    key: [order_id, line]\n    delete_mode: soft\n"
        )
    )

    # Run again after the source changed: a new table is appended (its key given), a new
    # column of a registered table is reported, the user's edits stay.
    with shop_pg.connect(autocommit=True) as conn:
        conn.execute("alter table app.customers add column tier text")
    assert main([*base, *pg_args, "--key", "audit_log=at,what"]) == 0
    out = capsys.readouterr().out
    assert "1 table(s) added: audit_log" in out
    assert "customers: already registered; columns new at the source: ['tier']" in out
    tables = {t.name: t for t in registry.load(project)[0].tables}
    assert tables["audit_log"].key == ("at", "what")
    assert tables["order_lines"].delete_mode == "soft"
    assert "tier" not in {c.name for c in tables["customers"].columns}

    # The password never goes in a flag.
    assert main([*base, "--dsn", shop_pg.conninfo() + " password=x"]) == 2
    assert "must not hold the password" in capsys.readouterr().err


def test_from_landing_reads_the_embedded_schemas(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The sample's landing zone: customers lands with JsonConverter schemas, the other
    northwind topics without; keys are never in the values."""
    landing = tmp_path / "landing"
    shutil.copytree(SAMPLE / "landing", landing)
    project = tmp_path / "project"
    project.mkdir()
    args = ["--project", str(project), "from-landing", "--source", "nw", "--root", str(landing)]
    assert main([*args, "--include", "northwind.public.*"]) == 0
    out = capsys.readouterr().out
    assert "0 table(s) added" in out
    assert "skipped customers: key unknown from the landing" in out
    assert "skipped orders: no line with an embedded schema (schemas off?)" in out
    assert "suppliers" not in out  # not included
    # Pagila's topic lands as Parquet: reported, not read as text
    assert main([*args, "--include", "pagila_jdbc.*"]) == 0
    assert "skipped address: Parquet or Avro files (their schema is not read here)" in (
        capsys.readouterr().out
    )

    assert main([*args, "--include", "*customers", "--key", "customers=customer_id"]) == 0
    assert "1 table(s) added: customers" in capsys.readouterr().out
    [table] = registry.load(project)[0].tables
    assert table.topic == "northwind.public.customers" and table.shape == "envelope"
    declared = {c.name: spark_type(c.type) for c in table.columns}
    # every column present when the first schema was written (loyalty_tier came later)
    [sample] = [t for t in northwind.TABLES if t.name == "customers"]
    assert declared == {c.name: spark_type(c.pg_type) for c in sample.initial_columns}
    types = {c.name: c.type for c in table.columns}
    assert types["external_id"] == "uuid" and types["profile"] == "jsonb"
    assert types["tags"] == "text[]" and types["credit_limit"] == "numeric(12,2)"
    write(project)
    assert check(project) == []
    assert (project / "models/silver/customers.sql").exists()


def test_names_postgresql_allows_quoted_are_registered_as_written(tmp_path: Path) -> None:
    """A table name that is not a model's gets one (its topic keeps the table's own name, see
    the type-map oracle); columns keep their names, written so YAML reads them back as text
    (`true`, `null`, `1label`), each with a doc block dbt takes."""
    names = ("OrderLine", "HTTPLog", "line$item", "Order Details", "2fa", "true")
    assert [discover.registry_name(n) for n in names] == [
        "order_line", "http_log", "line_item", "order_details", "t_2fa", "true",
    ]  # fmt: skip
    columns = ("order", "unit price", "größe", "null", "1label", "a,b")
    found = discover.Found("true", ["order", "unit price"], [(c, "text", None) for c in columns])
    text = "source: app\nlanding: {topic_prefix: app.public}\ntables:\n"
    text += discover.entry_text(found, delete_mode=None, topic=None)
    entry = yaml.safe_load(text)["tables"]["true"]
    assert entry["key"] == ["order", "unit price"] and list(entry["columns"]) == list(columns)
    (tmp_path / "app.yml").write_text(text)
    [table] = registry.load_source(tmp_path / "app.yml").tables
    docs = [table.doc_name(c) for c in columns]
    assert all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", d) for d in docs) and len(set(docs)) == 6
    # onboarding again (new tables at the source) leaves a renamed entry alone
    path = tmp_path / "project" / "tables" / "shop.yml"
    for run in range(2):
        report = discover.Report()
        found = discover.Found("OrderLine", ["Id"], [("Id", "integer", None)])
        landing = {"topic_prefix": "shop.public"}
        discover.add_to_registry(
            path, "shop", [(found, None)], landing=landing, description=None,
            delete_mode=None, report=report,
        )  # fmt: skip
        assert report.added == (["order_line"] if run == 0 else []), report
    [entry] = registry.load_source(path).tables
    assert (entry.name, entry.topic) == ("order_line", "shop.public.OrderLine")


def test_every_generated_file_names_its_registry_file() -> None:
    for output in outputs(REPO):
        head = output.text[:400]
        assert MARK in head and "tables/" in head, output.path


def test_changed_tables_follow_the_landing_zone(tmp_path: Path) -> None:
    """`python -m cdc_lakehouse.runner.changed` selects the tables whose topic folders changed since
    the listing the last successful run saved; everything on a first run or a remote root."""
    project = project_with(tmp_path, SHOP + INVOICES)
    landing = tmp_path / "landing"
    state = tmp_path / "lakehouse" / changed.LISTING_FILE
    accounts = landing / "topics" / "shop.public.accounts" / "partition=0"
    accounts.mkdir(parents=True)
    (accounts / "shop.public.accounts+0+0000000000.json").write_text("{}\n")

    selection, listing, why, new_bytes = changed.plan(project, str(landing), state)
    assert selection is None and "no listing saved" in why  # first run: everything
    assert new_bytes is None  # its size is not known: never a small run
    changed.save(state, listing)
    assert changed.plan(project, str(landing), state)[:4:3] == ([], 0)  # nothing landed: no run

    invoices = landing / "topics" / "shop.public.invoices" / "partition=0"
    invoices.mkdir(parents=True)
    (invoices / "shop.public.invoices+0+0000000000.json").write_text("{}\n")
    written = invoices / "shop.public.invoices+0+0000000001.json"
    written.write_text('{"a": 1}\n')
    an_hour_ago = time.time() - 3600
    os.utime(written, (an_hour_ago, an_hour_ago))
    selection, listing, why, new_bytes = changed.plan(project, str(landing), state)
    assert selection == ["source:landing_shop.invoices+"], why
    assert new_bytes == len("{}\n") + len('{"a": 1}\n')  # the new files' bytes
    # what is pending, and how far the table lags its landing (its oldest unseen file)
    assert re.fullmatch(
        r"1 of 2 tables changed: shop\.invoices \(2 new file\(s\), 0\.00 MB, oldest 36\d\d s ago\)",
        why,
    ), why
    changed.save(state, listing)

    # a query-based table's complete extract is a change once its manifest lands
    registry = project / "tables" / "shop.yml"
    registry.write_text(
        registry.read_text()
        + "  vendors:\n    shape: jdbc\n    order_by: [updated_at, id]\n    extracts: true\n"
        "    key: [id]\n    columns: {id: int, updated_at: timestamp}\n"
    )
    # the registry changed (a project file): everything is built once, then changes again
    selection, saving, why, new_bytes = changed.plan(project, str(landing), state)
    assert selection is None and why.startswith("the project's models, macros, registry"), why
    assert new_bytes is None
    changed.save(state, saving)
    extract = landing / "extracts" / "shop.public.vendors" / "2026-01-01T000000"
    extract.mkdir(parents=True)
    (extract / "part-00000.json").write_text("{}\n")
    assert changed.plan(project, str(landing), state)[0] == []  # no manifest yet: waits
    (extract / "_cdc_extract.json").write_text("{}\n")
    assert changed.plan(project, str(landing), state)[0] == ["source:landing_shop.vendors+"]
    registry.write_text(registry.read_text().split("  vendors:")[0])
    changed.save(state, changed.plan(project, str(landing), state)[1])
    # a model edited by hand is a project change too; so is dbt_project.yml
    (project / "models").mkdir()
    (project / "models" / "gold.sql").write_text("select 1 as one\n")
    assert changed.plan(project, str(landing), state)[0] is None
    changed.save(state, changed.plan(project, str(landing), state)[1])
    assert changed.plan(project, str(landing), state)[0] == []

    # a file rewritten in place (same name, new size) is a change too
    (accounts / "shop.public.accounts+0+0000000000.json").write_text("{}\n{}\n")
    assert changed.plan(project, str(landing), state)[0] == ["source:landing_shop.accounts+"]
    # a relative root is the project's, as dbt reads it
    (project / "landing").symlink_to(landing)
    assert changed.plan(project, "landing", state)[0] == ["source:landing_shop.accounts+"]
    assert changed.plan(project, "s3a://bucket/landing", state)[0] is None
    assert changed.plan(project, str(landing), state, build_all=True)[0] is None
    assert changed.with_selection(["build", "--exclude", "x"], ["source:a.b+"]) == [
        "build", "--exclude", "x", "--select", "source:a.b+", "--exclude-resource-type", "unit_test"
    ]  # fmt: skip
    assert changed.with_selection(["build", "--resource-type", "unit_test"], ["source:a.b+"]) == [
        "build", "--resource-type", "unit_test", "--select", "source:a.b+"
    ]  # fmt: skip
    with pytest.raises(ValueError, match="--select is chosen by this tool"):
        changed.with_selection(["build", "--select", "x"], ["source:a.b+"])


def test_a_saved_listing_spares_classifying_the_files_it_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the project unchanged since the saved listing, a file it names for a topic is that
    topic's again: only the other files are classified (a run with nothing new compiles no
    layout pattern); the listing is the one a run without the saved listing makes."""
    project = project_with(tmp_path, SHOP + INVOICES)
    landing = tmp_path / "landing"
    state = tmp_path / "lakehouse" / changed.LISTING_FILE
    accounts = landing / "topics" / "shop.public.accounts" / "partition=0"
    accounts.mkdir(parents=True)
    (accounts / "shop.public.accounts+0+0000000000.json").write_text("{}\n")
    (accounts / "_in_flight.json").write_text("{}\n")  # a writer's: never listed
    (accounts / "notes.txt").write_text("x\n")  # not the layout's: listed with its problem
    first = changed.plan(project, str(landing), state)
    changed.save(state, first.saving)

    classified: list[str] = []
    classify = TopicFiles.classify

    def counting(self: TopicFiles, path: str, relative: str) -> object:
        classified.append(relative)
        return classify(self, path, relative)

    monkeypatch.setattr(TopicFiles, "classify", counting)
    again = changed.plan(project, str(landing), state)
    assert again.saving == first.saving and again.selection == []
    assert classified == ["topics/shop.public.accounts/partition=0/_in_flight.json"]

    classified.clear()
    (accounts / "shop.public.accounts+0+0000000001.json").write_text("{}\n")
    landed = changed.plan(project, str(landing), state)
    assert landed.selection == ["source:landing_shop.accounts+"]
    assert sorted(classified) == [
        "topics/shop.public.accounts/partition=0/_in_flight.json",
        "topics/shop.public.accounts/partition=0/shop.public.accounts+0+0000000001.json",
    ]
    classified.clear()
    assert changed.plan(project, str(landing), state, build_all=True).saving == landed.saving
    assert len(classified) == 4  # --all trusts no saved listing: every file classified


def test_the_changed_tables_command_is_one_dbt_accepts_for_every_dbt_command() -> None:
    """`changed -- <command>` and `continuous --changed-only -- <command>` work with any dbt
    command that selects nodes: checked by dbt's own command-line parser, for every such
    command dbt has (`run` once failed: dbt refuses `--exclude-resource-type` there)."""
    import click
    from dbt.cli.main import cli

    selecting = sorted(
        name
        for name, command in cli.commands.items()
        if not isinstance(command, click.Group)
        and "--select" in {o for p in command.params for o in p.opts}
    )
    assert {"build", "run", "test", "seed", "snapshot"} <= set(selecting)
    for name in selecting:
        args = changed.with_selection([name], ["source:a.b+"])
        # parsed as dbt parses it (the profile and project options only for the parser's checks)
        context = cli.commands[name].make_context(
            name, [*args[1:], "--profiles-dir", str(REPO / "profiles"), "--project-dir", str(REPO)]
        )
        assert context.params["select"] == ("source:a.b+",), name
        # unit tests run in `build` and `test` only, and stay out of a changed-tables run
        excluded = context.params.get("exclude_resource_types") or ()
        assert ("unit_test" in excluded) == (name in ("build", "test")), name


def test_a_kept_manifest_is_keyed_on_what_dbt_parse_reads_of_a_command() -> None:
    """The long-lived processes reuse a parsed project for commands whose parse options (what
    `dbt parse` itself takes, from dbt's own option definitions) match; selection flags do
    not count, global options count wherever they stand, and commands that parse, or merge
    another manifest in, never reuse one."""
    options = ["--vars", '{"a": 1}', "--target-path", "t", "--log-path", "l"]
    assert parsed.parse_options(["build", "--select", "x+", "--full-refresh", *options]) == options
    assert parsed.parse_options(["show", "--inline", "select 1", "--output", "json", *options]) == (
        options
    )
    assert parsed.parse_options(["--log-level", "debug", "run", "-t", "cluster", "-s", "a"]) == [
        "--log-level", "debug", "-t", "cluster"
    ]  # fmt: skip
    assert parsed.parse_options(["docs", "generate", "--select", "a", "--vars={}"]) == ["--vars={}"]
    assert parsed.parse_options(["run-operation", "cdc_maintenance", "--args", "{}"]) == []
    for command in (["parse"], ["deps"], ["retry"], ["build", "--defer", "--state", "x"], ["no"]):
        assert parsed.parse_options(command) is None, command


def test_bronze_pipeline_columns_carry_no_tests() -> None:
    """Bronze keeps rejected lines, whose pipeline columns (`_cdc_seq`...) are null: a
    not_null test there fails the build as soon as one line is rejected (caught by the oracle's
    malformed-lines fault); the change log and silver test them. The change log's and the
    history's rules are one test each (`cdc_change_log_valid` over the key, the sequence and the
    operation; `cdc_history_intervals`), and silver's (`cdc_current_state_valid`), not a test
    node per column."""
    path = REPO / "python_models/bronze/northwind/_northwind__bronze.yml"
    for model in yaml.safe_load(path.read_text())["models"]:
        tested = [c["name"] for c in model["columns"] if c.get("data_tests")]
        assert not [c for c in tested if c.startswith("_cdc_")], model["name"]
    layers = {
        "staging/northwind/_northwind__staging.yml": "cdc_lakehouse.cdc_change_log_valid",
        "silver/history/_northwind__history.yml": "cdc_lakehouse.cdc_history_intervals",
    }
    for path, rule in layers.items():
        for model in yaml.safe_load((REPO / "models" / path).read_text())["models"]:
            assert not [c["name"] for c in model["columns"] if c.get("data_tests")], model["name"]
            found = [t[rule] for t in model["data_tests"] if isinstance(t, dict) and rule in t]
            assert len(found) == 1, model["name"]
            assert found[0]["arguments"]["unique_key"], model["name"]
    # silver: its rules in one test (`cdc_current_state_valid`: the sequence, no placeholder, no
    # row deleted at the source), dbt's `unique` and `not_null` on the key
    silver = yaml.safe_load((REPO / "models/silver/_northwind__silver.yml").read_text())
    for model in silver["models"]:
        assert model["data_tests"].count("cdc_lakehouse.cdc_current_state_valid") == 1
        tested = {c["name"]: c["data_tests"] for c in model["columns"] if c.get("data_tests")}
        assert not [c for c in tested if c.startswith("_cdc_")], model["name"]
        assert tested, model["name"]  # the key's


def _result(status: str, unique_id: str | None, *parents: str) -> SimpleNamespace:
    """One node's entry in dbt's run results, as `dbtRunner().invoke(...).result.results` has
    it: its status, and the node with its unique id and the nodes it depends on."""
    node = SimpleNamespace(unique_id=unique_id, depends_on=SimpleNamespace(nodes=list(parents)))
    return SimpleNamespace(status=status, node=node if unique_id else None)


def test_a_failed_changed_tables_run_builds_only_its_unfinished_tables_again(
    tmp_path: Path,
) -> None:
    """After a failed changed-tables run, the tables it finished count as built; a table whose
    model or test failed, or was skipped behind a failure, is selected again next time. A
    failure that reaches no table (a hook) saves nothing."""
    project = project_with(tmp_path, SHOP + INVOICES)
    landing = tmp_path / "landing"
    state = tmp_path / "lakehouse" / changed.LISTING_FILE
    changed.save(state, changed.plan(project, str(landing), state)[1])
    for topic in ("shop.public.accounts", "shop.public.invoices"):
        folder = landing / "topics" / topic / "partition=0"
        folder.mkdir(parents=True)
        (folder / f"{topic}+0+0000000000.json").write_text("{}\n")
    both = ["source:landing_shop.accounts+", "source:landing_shop.invoices+"]
    assert changed.plan(project, str(landing), state)[0] == both

    source = "source.p.landing_shop."
    results = [
        _result("success", "model.p.bronze_shop__accounts", source + "accounts"),
        _result("pass", "test.p.unique_accounts", "model.p.accounts"),
        _result("success", "model.p.accounts", "model.p.bronze_shop__accounts"),
        _result("error", "model.p.bronze_shop__invoices", source + "invoices"),
        _result("skipped", "model.p.invoices", "model.p.bronze_shop__invoices"),
    ]

    def failed(entries: list) -> SimpleNamespace:
        return SimpleNamespace(success=False, result=SimpleNamespace(results=entries))

    assert changed.failed_topics(results, registry.tables(project)) == {"shop.public.invoices"}
    # a failure nothing traces to a table (an on-run-end hook): the whole run is unfinished
    hook = [*results[:3], _result("error", None)]
    after_run = changed.next_run(project, str(landing), state, ["build"]).after_run
    after_run(failed(hook))
    assert changed.plan(project, str(landing), state)[0] == both

    after_run = changed.next_run(project, str(landing), state, ["build"]).after_run
    after_run(failed(results))
    assert changed.plan(project, str(landing), state)[0] == ["source:landing_shop.invoices+"]
    # a failed test of the table that went through: that table is built again too
    after_run = changed.next_run(project, str(landing), state, ["build"]).after_run
    after_run(failed([_result("fail", "test.p.unique_invoices", "model.p.invoices"),
                      _result("success", "model.p.invoices", source + "invoices")]))  # fmt: skip
    assert changed.plan(project, str(landing), state)[0] == ["source:landing_shop.invoices+"]
    after_run = changed.next_run(project, str(landing), state, ["build"]).after_run
    after_run(SimpleNamespace(success=True, result=None))
    assert changed.plan(project, str(landing), state)[0] == []


def test_the_data_tests_start_where_the_last_tested_run_of_the_tables_started(
    tmp_path: Path,
) -> None:
    """The runners scope a run's data tests to the keys with events loaded since the start of
    the oldest run whose tests last passed on a selected table (CDC_TESTS_SINCE, the package's
    cdc_tested_rows): every row on a run of every table, after a run that ran no data test,
    and for a table never tested; a table whose test failed keeps its moment, so its keys are
    tested again. Only for tables whose landing holds at least `scoped_tests_bytes`."""
    project = project_with(tmp_path, SHOP + INVOICES)
    landing = tmp_path / "landing"
    state = tmp_path / "lakehouse" / changed.LISTING_FILE
    source = "source.p.landing_shop."

    def land(topic: str, offset: int) -> None:
        folder = landing / "topics" / topic / "partition=0"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{topic}+0+{offset:010d}.json").write_text("{}\n")

    def ok() -> SimpleNamespace:
        return SimpleNamespace(success=True, result=None)

    first = changed.next_run(project, str(landing), state, ["build"], scoped_tests_bytes=0)
    assert first.command == ["build"] and first.tests_since is None  # every table: every row
    before = time.time_ns() // 1000
    first.after_run(ok())
    tested = json.loads(state.read_text())["tested_since"]
    assert set(tested) == {"shop.public.accounts", "shop.public.invoices"}
    assert tested["shop.public.accounts"] <= before

    land("shop.public.invoices", 0)
    second = changed.next_run(project, str(landing), state, ["build"], scoped_tests_bytes=0)
    assert second.tests_since == tested["shop.public.invoices"]
    # its test fails: the table's moment stays, the next run tests its keys from there again
    second.after_run(
        SimpleNamespace(success=False, result=SimpleNamespace(results=[
            _result("success", "model.p.bronze_shop__invoices", source + "invoices"),
            _result("fail", "test.p.unique_invoices", "model.p.invoices"),
        ]))
    )  # fmt: skip
    land("shop.public.invoices", 1)
    land("shop.public.accounts", 0)
    third = changed.next_run(project, str(landing), state, ["build"], scoped_tests_bytes=0)
    assert third.tests_since == tested["shop.public.invoices"]  # the older of the two
    third.after_run(ok())
    after = json.loads(state.read_text())["tested_since"]
    assert after["shop.public.invoices"] > tested["shop.public.invoices"]

    # a run without data tests tests nothing and moves nothing
    land("shop.public.accounts", 1)
    # a small table: every row (its topic holds a few bytes, under the default limit)
    small = changed.next_run(project, str(landing), state, ["build"])
    assert small.command is not None and small.tests_since is None
    assert changed.next_run(
        project, str(landing), state, ["build"], scoped_tests_bytes=6
    ).tests_since
    for command in (["run"], ["build", "--exclude-resource-type", "test"]):
        choice = changed.next_run(project, str(landing), state, command, scoped_tests_bytes=0)
        assert choice.tests_since is None, command
    choice.after_run(ok())
    assert json.loads(state.read_text())["tested_since"] == after

    with changed.tests_scope(123):
        assert os.environ[changed.TESTS_SINCE] == "123"
    assert changed.TESTS_SINCE not in os.environ


class _MacroReturn(Exception):
    pass


def _package_macros(relative: str) -> SimpleNamespace:
    """The dbt package's macros in `relative` (below dbt_package/macros), rendered by plain
    Jinja with dbt's `return` and the package's own name for calls between them."""
    import jinja2

    def returned(value: object) -> None:
        raise _MacroReturn(value)

    source = (REPO / "dbt_package/macros" / relative).read_text()
    template = jinja2.Environment(extensions=["jinja2.ext.do"]).from_string(source)
    package = SimpleNamespace()
    module = template.make_module({"return": returned, "cdc_lakehouse": package})

    def call(name: str):
        def run(*args: object) -> object:
            try:
                getattr(module, name)(*args)
            except _MacroReturn as done:
                return done.args[0]
            raise AssertionError(f"{name} returned nothing")

        return run

    for name in dir(module):
        if not name.startswith("_"):
            setattr(package, name, call(name))
    return package


def test_pipeline_columns_are_the_same_on_both_sides() -> None:
    """The SQL side (the package's macros) and the Python side (the decoder, the generated yml
    of every layer) list the same pipeline columns in the same order."""
    from cdc_lakehouse.tables import generate

    macros = _package_macros("cdc/cdc_config.sql")
    assert tuple(macros.cdc_change_log_columns()) == generate.STAGING_COLUMNS
    assert tuple(macros.cdc_silver_columns()) == generate.SILVER_COLUMNS
    assert tuple(macros.cdc_event_origin_columns()) == generate.ORIGIN_COLUMNS
    # and silver's generated yml documents exactly those, after the source columns
    path = REPO / "models/silver/_northwind__silver.yml"
    model = yaml.safe_load(path.read_text())["models"][0]
    names = [c["name"] for c in model["columns"] if c["name"].startswith("_cdc_")]
    assert tuple(names) == generate.SILVER_COLUMNS, model["name"]


def _built(*entries: tuple[str, str, str]) -> SimpleNamespace:
    """A dbt result as `dbtRunner().invoke(...)` returns it: (model name, materialization,
    status) per node, with dbt's own enums."""
    from dbt.artifacts.schemas.results import RunStatus
    from dbt.node_types import NodeType

    results = [
        SimpleNamespace(
            status=RunStatus(status),
            node=SimpleNamespace(
                name=name,
                resource_type=NodeType.Model,
                config=SimpleNamespace(materialized=materialized),
            ),
        )
        for name, materialized, status in entries
    ]
    return SimpleNamespace(success=True, exception=None, result=SimpleNamespace(results=results))


def test_the_driver_compacts_what_its_runs_built_every_n_runs_that_built_tables() -> None:
    """`continuous --compact-every 2`: after every second run that built tables, one
    `run-operation cdc_compact` of the table and incremental models those runs built (views and
    failed models aside), with the runs' parse options (dbt's own parser accepts it); runs that
    built nothing do not count; a failed compaction keeps its models for the next one."""
    from dbt.cli.main import cli

    from cdc_lakehouse.runner import continuous

    runs = iter(
        [
            _built(("bronze_a", "incremental", "success"), ("stg_a", "view", "success")),
            _built(),  # nothing landed
            _built(("a", "incremental", "success"), ("a_history", "incremental", "error")),
            _built(("bronze_b", "incremental", "success")),
            _built(("dim", "table", "success")),
            _built(("b", "incremental", "success")),
        ]
    )
    compactions: list[list[str]] = []
    outcomes = iter([False, True])

    class Project:
        def invoke(self, args: list[str]) -> SimpleNamespace:
            if args[0] != "run-operation":
                return next(runs)
            compactions.append(args)
            return SimpleNamespace(success=next(outcomes), exception=None)

    command = ["build", "--select", "x+", "--vars", '{"cdc_landing_root": "l"}', "-t", "cluster"]
    reports = list(
        continuous.invoke_repeatedly(command, runs=6, compact_every=2, project=Project())
    )
    assert [r.get("compacted", {}).get("success") for r in reports] == [
        None, None, False, None, True, None
    ]  # fmt: skip
    first, second = compactions
    assert first[:3] == ["run-operation", "cdc_compact", "--args"]
    assert [first[4], *first[6:]] == ["--vars", "-t", "cluster"]
    # the runs' vars: the command's and the driver's (continuous.DRIVER_VARS)
    assert yaml.safe_load(first[5]) == {"cdc_landing_root": "l", "cdc_run_summary": False}
    assert yaml.safe_load(first[3]) == {"models": ["a", "bronze_a"]}
    # the failed compaction's models again, with those built since
    assert yaml.safe_load(second[3]) == {"models": ["a", "bronze_a", "bronze_b", "dim"]}
    context = cli.commands["run-operation"].make_context(
        "run-operation",
        [*first[1:], "--profiles-dir", str(REPO / "profiles"), "--project-dir", str(REPO)],
    )
    assert context.params["macro"] == "cdc_compact"
    assert context.params["target"] == "cluster"


def test_the_driver_adds_its_vars_to_each_command_and_keeps_the_users() -> None:
    """The driver's runs get DRIVER_VARS (no row-count summary) in their `--vars`, in both of
    dbt's spellings; a value the command sets wins; a command without `--vars` gets one."""
    from cdc_lakehouse.runner import continuous

    def vars_of(command: list[str]) -> dict:
        for index, word in enumerate(command):
            if word.startswith("--vars="):
                return yaml.safe_load(word.split("=", 1)[1])
            if word == "--vars":
                return yaml.safe_load(command[index + 1])
        raise AssertionError(command)

    added = continuous.with_driver_vars(["build", "-s", "x+"])
    assert added[:3] == ["build", "-s", "x+"] and vars_of(added) == {"cdc_run_summary": False}
    for spelling in (["--vars", "{cdc_landing_root: l}"], ["--vars={cdc_landing_root: l}"]):
        merged = continuous.with_driver_vars(["build", *spelling, "-t", "cluster"])
        assert len(merged) == len(spelling) + 3 and merged[-2:] == ["-t", "cluster"]
        assert vars_of(merged) == {"cdc_landing_root": "l", "cdc_run_summary": False}
    kept = continuous.with_driver_vars(["build", "--vars", "{cdc_run_summary: true}"])
    assert vars_of(kept) == {"cdc_run_summary": True}
    assert continuous.with_driver_vars(["build", "--vars"]) == ["build", "--vars"]


def test_a_small_run_runs_with_the_small_input_settings_and_the_next_with_the_profiles(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The driver gives a changed-only run of at most `small_run_bytes` new bytes Spark's
    small-input settings (cdc_lakehouse.runner.small_runs): the profile's variables, for that
    run only (also when it fails), the user's own kept; a larger run, one of unknown size
    (everything) and any run with the limit 0 get the environment as it was. The profile reads
    each variable; the adapter sets the profile's settings on the live session at the start of
    each dbt command (relations.py)."""
    from cdc_lakehouse.runner import continuous, small_runs

    names = list(small_runs.ENVIRONMENT)
    for name in names:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CDC_SHUFFLE_PARTITIONS", "8")  # the user's choice stays
    own = {name: os.environ.get(name) for name in names}
    small = {**small_runs.ENVIRONMENT, "CDC_SHUFFLE_PARTITIONS": "8"}
    seen: list[dict[str, str | None]] = []

    class Project:
        def invoke(self, args: list[str]) -> SimpleNamespace:
            seen.append({name: os.environ.get(name) for name in names})
            if args == ["fails"]:
                raise RuntimeError("a failed run")
            return SimpleNamespace(success=True, exception=None, result=None)

    def runs(*choices: changed.RunChoice, **options: int) -> list[dict]:
        pending = iter(choices)
        return list(
            continuous.invoke_repeatedly(
                ["build"], runs=len(choices), choose=lambda c: next(pending), project=Project(),
                **options,
            )
        )  # fmt: skip

    def choice(command: str, new_bytes: int | None) -> changed.RunChoice:
        return changed.RunChoice([command], lambda result: None, "1 of 2 tables changed", new_bytes)

    reports = runs(
        choice("build", 1_000),
        choice("build", small_runs.DEFAULT_LIMIT + 1),
        choice("fails", small_runs.DEFAULT_LIMIT),
        choice("build", None),
    )
    assert seen == [small, own, small, own]
    assert [r.get("small", False) for r in reports] == [True, False, True, False]
    assert [r["success"] for r in reports] == [True, True, False, True]
    assert {name: os.environ.get(name) for name in names} == own  # also after the failure
    seen.clear()
    runs(choice("build", 1), small_run_bytes=0)
    assert seen == [own]
    profile = (REPO / "profiles" / "profiles.yml").read_text()
    for name in names:
        assert f"env_var('{name}'" in profile, name
