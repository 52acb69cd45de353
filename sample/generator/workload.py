"""A seeded workload for the Northwind-shaped sample source, run against a real PostgreSQL.

    workload = NorthwindWorkload(seed=7)
    with psycopg.connect(dsn) as conn:
        workload.create_schema(conn)
        workload.load_initial(conn)
        workload.run_phase(conn, phase=1, transactions=200)

Every value comes from the seed and a simulated clock (no wall clock), so a seed always produces
the same source rows. The choice of keys reads PostgreSQL (ordered by key), so it stays
deterministic too. What a phase does, by weight: new orders (order, lines and stock updates in
one transaction, restocking first when a product runs out: two updates of one key in one
transaction), shipping, order line edits, cancelled orders (lines and order deleted together),
price changes and customer edits that leave the out-of-line text columns alone (Debezium sends
the TOAST placeholder), edits of those long texts, new customers and products, customer deletes
and later re-inserts of the same key, primary-key changes (`UPDATE customers SET customer_id`,
cascading to orders), columns set to NULL, supplier edits, deletes and re-inserts of a deleted
supplier's key (query-based capture: the deletes are found by the snapshots' diff).
Phase 2 adds `customers.loyalty_tier` mid-stream (`ALTER TABLE ... ADD COLUMN`); phase 3
truncates `order_details` mid-stream.
"""

from __future__ import annotations

import random
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from psycopg import Connection
from psycopg.types.json import Jsonb

from sample.generator.northwind import DDL, MID_STREAM_DDL, TABLES, Table, canonical_row

START = datetime(2024, 6, 3, 6, 0, tzinfo=UTC)
ALTER_PHASE = 2
TRUNCATE_PHASE = 3
# STORAGE EXTERNAL columns move out of line (TOAST) once a row passes about 2 KB.
LONG_TEXT = 2600

COMPANY_FIRST = (
    "Alfreds", "Ana Trujillo", "Antonio Moreno", "Around the Horn", "Berglunds", "Blauer See",
    "Bólido", "Bottom-Dollar", "Chop-suey", "Comércio Mineiro", "Drachenblut", "Du monde entier",
    "Frankenversand", "Galería del gastrónomo", "Hanari", "Hungry Coyote", "Königlich",
    "La maison", "Laughing Bacchus", "Lehmanns", "Let's Stop N Shop", "Mère Paillarde",
    "North/South", "Océano Atlántico", "Que Delícia", "Rattlesnake Canyon", "Santé",
    "Spécialités du monde", "Tradição", "Vaffeljernet", "Wartian", "日本食品商事",
)  # fmt: skip
COMPANY_LAST = (
    "Futterkiste", "Delikatessen", "Markets", "Importadora", "Handel", "Spezialitäten",
    "Traders", "Supermercado", "Herkku", "& Co.", "snabbköp", "Épicerie", "Feinkost",
)  # fmt: skip
FIRST_NAMES = (
    "Maria", "Ana", "Antonio", "Thomas", "Hanna", "Frédérique", "Martín", "Yang", "Renée", "Zoë",
    "Jürgen", "Björn", "José", "Yoshi", "Søren", "太郎",
)  # fmt: skip
LAST_NAMES = (
    "Anders", "Trujillo", "Moreno", "Hardy", "Berglund", "Citeaux", "Chang", "Pérez", "Müller",
    "Lefèvre", "Sørensen", "Tanaka", "Öztürk", "Kowalski", "山田",
)  # fmt: skip
COUNTRIES = (
    "Germany", "Mexico", "UK", "Sweden", "France", "Spain", "Canada", "Argentina", "Switzerland",
    "Brazil", "Austria", "Italy", "Portugal", "USA", "Venezuela", "Ireland", "Belgium", "Norway",
    "Denmark", "Finland", "Poland", "Japan",
)  # fmt: skip
TAGS = ("vip", "wholesale", "retail", "export", "net30", "prepaid", "b2b", "gourmet", "日本")
TIERS = ("bronze", "silver", "gold", "platinum")
CATEGORIES = ("Beverages", "Condiments", "Confections", "Dairy Products", "Produce", "Seafood")
PRODUCT_WORDS = (
    "Chai", "Chang", "Côte de Blaye", "Gumbo Mix", "Aniseed Syrup", "Boysenberry Spread",
    "Dried Pears", "Ikura", "Queso Cabrales", "Konbu", "Tofu", "Pavlova", "Knäckebröd",
    "Guaraná Fantástica", "Nuß-Nougat-Creme", "Gummibärchen", "Matjeshering", "抹茶 Matcha",
)  # fmt: skip
SENTENCES = (
    "Prefers deliveries before 10:00 on weekdays; the loading dock is behind the building.",
    "Invoices go to the accounts payable mailbox, never to the contact person directly.",
    "Called about order {n}: some cases arrived damaged, credit note issued.",
    "Wants bilingual labels (English/Français) on every pallet — « merci ».",
    "Store dry and cool, below {n} °C; once opened, use within {n} days.",
    "Label texts in English, Deutsch, Français and 日本語 are printed on every unit.",
    'Quotes "inside" text, a back\\slash and a tab\there must survive the trip.',
)
STATUSES = ("new", "packed", "shipped", "delivered")


class NorthwindWorkload:
    """Seeded changes to the sample source. One instance drives all phases of one history."""

    def __init__(self, seed: int, *, scale: float = 1.0) -> None:
        self.seed = seed
        self.scale = scale
        self.rng = random.Random(seed)
        self.clock = START
        self.deleted_customers: list[dict[str, Any]] = []
        self.deleted_suppliers: list[int] = []
        self.loyalty_added = False
        self.counts: Counter[str] = Counter()
        self._next_order = 10_000
        self._next_product = 1_000
        self._next_customer = 0
        self._next_supplier = 500

    # -- setup ------------------------------------------------------------------------------
    def create_schema(self, conn: Connection) -> None:
        conn.execute(DDL)
        conn.commit()

    def load_initial(self, conn: Connection) -> None:
        """Existing data before capture starts (arrives as Debezium snapshot reads)."""
        rng = self.rng
        n_customers = max(8, int(60 * self.scale))
        n_products = max(6, int(40 * self.scale))
        n_orders = max(10, int(150 * self.scale))
        with conn.transaction():
            for _ in range(n_customers):
                self._insert(conn, "customers", self._new_customer(conn))
            for _ in range(n_products):
                self._insert_product(conn)
            for _ in range(max(4, int(15 * self.scale))):
                self._insert_supplier(conn)
            for _ in range(n_orders):
                self._new_order(conn, lines=rng.randint(1, 4), stock=False)
        self.counts.clear()

    # -- phases -----------------------------------------------------------------------------
    def run_phase(self, conn: Connection, phase: int, transactions: int) -> Counter[str]:
        """`transactions` random transactions; phase 2 and 3 add the mid-stream DDL/truncate."""
        activities, weights = zip(*self._activities(), strict=True)
        counts: Counter[str] = Counter()
        for i in range(transactions):
            if phase == ALTER_PHASE and i == transactions // 2 and not self.loyalty_added:
                conn.execute(MID_STREAM_DDL)
                conn.commit()
                self.loyalty_added = True
                counts["alter table"] += 1
            if phase == TRUNCATE_PHASE and i == transactions // 2:
                conn.execute("TRUNCATE order_details")
                conn.commit()
                counts["truncate"] += 1
            self._tick()
            activity = self.rng.choices(activities, weights)[0]
            with conn.transaction():
                activity(conn)
            counts[activity.__name__.lstrip("_")] += 1
        self.counts.update(counts)
        return counts

    def _activities(self) -> list[tuple[Callable[[Connection], None], int]]:
        return [
            (self._order_new, 20),
            (self._order_ship, 10),
            (self._order_line_edit, 8),
            (self._order_cancel, 4),
            (self._product_price, 8),
            (self._product_description, 2),
            (self._product_new, 1),
            (self._product_delete, 1),
            (self._customer_edit, 8),
            (self._customer_notes, 2),
            (self._customer_new, 3),
            (self._customer_delete, 1),
            (self._customer_reinsert, 1),
            (self._customer_rekey, 1),
            (self._supplier_edit, 3),
            (self._supplier_new, 1),
            (self._supplier_delete, 1),
            (self._supplier_reinsert, 1),
        ]

    # -- activities -------------------------------------------------------------------------
    def _order_new(self, conn: Connection) -> None:
        self._new_order(conn, lines=self.rng.randint(1, 4), stock=True)

    def _order_ship(self, conn: Connection) -> None:
        order_id = self._pick(conn, "select order_id from orders where status <> 'delivered'")
        if order_id is None:
            return
        status = self.rng.choice(STATUSES[1:])
        shipped = self._now_us() if status != "packed" else None
        conn.execute(
            "update orders set status = %s, shipped_at = %s, updated_at = %s where order_id = %s",
            (status, shipped, self._naive(), order_id),
        )

    def _order_line_edit(self, conn: Connection) -> None:
        key = self._pick_row(conn, "select order_id, product_id from order_details")
        if key is None:
            return
        discount = self.rng.choice([None, Decimal("0.00"), Decimal("0.05"), Decimal("0.15")])
        conn.execute(
            "update order_details set quantity = %s, discount = %s "
            "where order_id = %s and product_id = %s",
            (self.rng.randint(1, 40), discount, *key),
        )

    def _order_cancel(self, conn: Connection) -> None:
        order_id = self._pick(conn, "select order_id from orders where status = 'new'")
        if order_id is None:
            return
        conn.execute("delete from order_details where order_id = %s", (order_id,))
        conn.execute("delete from orders where order_id = %s", (order_id,))

    def _product_price(self, conn: Connection) -> None:
        product_id = self._pick(conn, "select product_id from products")
        if product_id is None:
            return
        conn.execute(
            "update products set unit_price = %s, updated_at = %s where product_id = %s",
            (self._money(1, 300), self._now_us(), product_id),
        )

    def _product_description(self, conn: Connection) -> None:
        product_id = self._pick(conn, "select product_id from products")
        if product_id is None:
            return
        conn.execute(
            "update products set description = %s, attributes = %s, thumbnail = %s "
            "where product_id = %s",
            (self._text(), Jsonb(self._attributes()), self._bytes(), product_id),
        )

    def _product_new(self, conn: Connection) -> None:
        self._insert_product(conn)

    def _product_delete(self, conn: Connection) -> None:
        product_id = self._pick(
            conn,
            "select product_id from products p where not exists "
            "(select 1 from order_details d where d.product_id = p.product_id)",
        )
        if product_id is not None:
            conn.execute("delete from products where product_id = %s", (product_id,))

    def _customer_edit(self, conn: Connection) -> None:
        customer_id = self._pick(conn, "select customer_id from customers")
        if customer_id is None:
            return
        rng = self.rng
        changes: dict[str, Any] = {"updated_at": self._naive()}
        for column, value in (
            ("contact_name", f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"),
            ("credit_limit", rng.choice([None, Decimal("0.00"), self._money(100, 99_999)])),
            ("tags", rng.choice([None, [], rng.sample(TAGS, rng.randint(1, 3))])),
            ("profile", Jsonb(self._profile())),
            ("country", rng.choice(COUNTRIES)),
        ):
            if rng.random() < 0.5:
                changes[column] = value
        if self.loyalty_added and rng.random() < 0.6:
            changes["loyalty_tier"] = rng.choice(TIERS)
        sets = ", ".join(f"{c} = %s" for c in changes)
        conn.execute(
            f"update customers set {sets} where customer_id = %s",
            (*changes.values(), customer_id),
        )

    def _customer_notes(self, conn: Connection) -> None:
        customer_id = self._pick(conn, "select customer_id from customers")
        if customer_id is not None:
            conn.execute(
                "update customers set notes = %s, updated_at = %s where customer_id = %s",
                (self._text(), self._naive(), customer_id),
            )

    def _customer_new(self, conn: Connection) -> None:
        self._insert(conn, "customers", self._new_customer(conn))

    def _customer_delete(self, conn: Connection) -> None:
        """Delete a customer with its orders and their lines, in one transaction."""
        customer_id = self._pick(conn, "select customer_id from customers")
        if customer_id is None:
            return
        row = conn.execute(
            "select * from customers where customer_id = %s", (customer_id,)
        ).fetchone()
        columns = [d.name for d in conn.execute("select * from customers limit 0").description]
        conn.execute(
            "delete from order_details where order_id in "
            "(select order_id from orders where customer_id = %s)",
            (customer_id,),
        )
        conn.execute("delete from orders where customer_id = %s", (customer_id,))
        conn.execute("delete from customers where customer_id = %s", (customer_id,))
        self.deleted_customers.append(dict(zip(columns, row, strict=True)))

    def _customer_reinsert(self, conn: Connection) -> None:
        """A deleted customer comes back with the same key (and a fresh edit)."""
        if not self.deleted_customers:
            return
        row = self.deleted_customers.pop(0)
        row["contact_name"] = f"{self.rng.choice(FIRST_NAMES)} {self.rng.choice(LAST_NAMES)}"
        row["updated_at"] = self._naive()
        for column in ("profile",):
            if row.get(column) is not None:
                row[column] = Jsonb(row[column])
        if not self.loyalty_added:
            row.pop("loyalty_tier", None)
        self._insert(conn, "customers", row)

    def _customer_rekey(self, conn: Connection) -> None:
        """A primary-key change; `ON UPDATE CASCADE` rewrites the customer's orders."""
        customer_id = self._pick(conn, "select customer_id from customers")
        if customer_id is not None:
            conn.execute(
                "update customers set customer_id = %s where customer_id = %s",
                (self._customer_key(), customer_id),
            )

    def _supplier_edit(self, conn: Connection) -> None:
        """One or two suppliers changed by one statement (two rows share `last_update`)."""
        ids = [r[0] for r in conn.execute("select supplier_id from suppliers order by 1")]
        if not ids:
            return
        chosen = self.rng.sample(ids, min(len(ids), self.rng.choice([1, 1, 2])))
        conn.execute(
            "update suppliers set phone = %s, last_update = %s where supplier_id = any(%s)",
            (self._phone(), self._naive_ms(), chosen),
        )

    def _supplier_new(self, conn: Connection) -> None:
        self._insert_supplier(conn)

    def _supplier_delete(self, conn: Connection) -> None:
        """A supplier deleted: the polling capture never sees it; the next snapshot does."""
        ids = [r[0] for r in conn.execute("select supplier_id from suppliers order by 1")]
        if len(ids) > 2:
            chosen = self.rng.choice(ids)
            conn.execute("delete from suppliers where supplier_id = %s", (chosen,))
            self.deleted_suppliers.append(chosen)

    def _supplier_reinsert(self, conn: Connection) -> None:
        """A deleted supplier's key back with new values (orders after the snapshot's delete)."""
        if self.deleted_suppliers:
            key = self.deleted_suppliers.pop(self.rng.randrange(len(self.deleted_suppliers)))
            self._insert_supplier(conn, key)

    # -- row builders -----------------------------------------------------------------------
    def _new_customer(self, conn: Connection) -> dict[str, Any]:
        rng = self.rng
        row: dict[str, Any] = {
            "customer_id": self._customer_key(),
            "company_name": f"{rng.choice(COMPANY_FIRST)} {rng.choice(COMPANY_LAST)}",
            "contact_name": f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}",
            "country": rng.choice(COUNTRIES),
            "credit_limit": rng.choice([None, Decimal("0.00"), self._money(100, 99_999)]),
            "external_id": uuid.UUID(int=rng.getrandbits(128), version=4),
            "tags": rng.choice([None, [], rng.sample(TAGS, rng.randint(1, 3))]),
            "profile": Jsonb(self._profile()),
            "notes": self._text() if rng.random() < 0.7 else "short note",
            "created_at": self._now_us(),
            "updated_at": self._naive(),
        }
        if self.loyalty_added:
            row["loyalty_tier"] = rng.choice((None, *TIERS))
        return row

    def _insert_product(self, conn: Connection) -> None:
        rng = self.rng
        self._next_product += 1
        self._insert(
            conn,
            "products",
            {
                "product_id": self._next_product,
                "product_name": f"{rng.choice(PRODUCT_WORDS)} {self._next_product}",
                "category": rng.choice(CATEGORIES),
                "unit_price": rng.choice([Decimal("0.00"), Decimal("1.28"), self._money(1, 300)]),
                "units_in_stock": rng.randint(0, 120),
                "discontinued": rng.random() < 0.1,
                "description": self._text() if rng.random() < 0.8 else None,
                "attributes": Jsonb(self._attributes()),
                "thumbnail": self._bytes() if rng.random() < 0.8 else None,
                "updated_at": self._now_us(),
            },
        )

    def _insert_supplier(self, conn: Connection, key: int | None = None) -> None:
        if key is None:
            self._next_supplier += 1
            key = self._next_supplier
        self._insert(
            conn,
            "suppliers",
            {
                "supplier_id": key,
                "company_name": f"{self.rng.choice(COMPANY_FIRST)} {self.rng.choice(COMPANY_LAST)}",
                "country": self.rng.choice(COUNTRIES),
                "phone": self._phone(),
                "last_update": self._naive_ms(),
            },
        )

    def _new_order(self, conn: Connection, *, lines: int, stock: bool) -> None:
        customer_id = self._pick(conn, "select customer_id from customers")
        products = [
            r[0] for r in conn.execute("select product_id from products order by product_id")
        ]
        if customer_id is None or not products:
            return
        self._next_order += 1
        order_id = self._next_order
        order_date = self.clock.date()
        self._insert(
            conn,
            "orders",
            {
                "order_id": order_id,
                "customer_id": customer_id,
                "order_date": order_date,
                "required_date": order_date + timedelta(days=self.rng.randint(3, 30)),
                "shipped_at": None,
                "ship_country": self.rng.choice(COUNTRIES),
                "freight": self._money(0, 900),
                "status": "new",
                "updated_at": self._naive(),
            },
        )
        for product_id in self.rng.sample(products, min(lines, len(products))):
            quantity = self.rng.randint(1, 30)
            price = conn.execute(
                "select unit_price, units_in_stock from products where product_id = %s",
                (product_id,),
            ).fetchone()
            self._insert(
                conn,
                "order_details",
                {
                    "order_id": order_id,
                    "product_id": product_id,
                    "unit_price": price[0],
                    "quantity": quantity,
                    "discount": self.rng.choice([Decimal("0.00"), Decimal("0.05"), None]),
                },
            )
            if stock:
                if (price[1] or 0) < quantity:  # restock first: two updates of one key
                    conn.execute(
                        "update products set units_in_stock = units_in_stock + 100 "
                        "where product_id = %s",
                        (product_id,),
                    )
                conn.execute(
                    "update products set units_in_stock = units_in_stock - %s "
                    "where product_id = %s",
                    (quantity, product_id),
                )

    # -- helpers ----------------------------------------------------------------------------
    @staticmethod
    def _insert(conn: Connection, table: str, row: dict[str, Any]) -> None:
        columns = ", ".join(row)
        placeholders = ", ".join(["%s"] * len(row))
        conn.execute(
            f"insert into {table} ({columns}) values ({placeholders})", tuple(row.values())
        )

    def _pick(self, conn: Connection, sql: str) -> Any:
        row = self._pick_row(conn, sql)
        return None if row is None else row[0]

    def _pick_row(self, conn: Connection, sql: str) -> tuple[Any, ...] | None:
        """A random row of `sql` (its columns are the order: the choice depends on the seed)."""
        rows = sorted(conn.execute(sql).fetchall())
        return self.rng.choice(rows) if rows else None

    def _tick(self) -> None:
        self.clock += timedelta(
            seconds=self.rng.randint(5, 600), microseconds=self.rng.randint(0, 999_999)
        )

    def _now_us(self) -> datetime:
        return self.clock

    def _naive(self) -> datetime:
        return self.clock.replace(tzinfo=None)

    def _naive_ms(self) -> datetime:
        value = self._naive()
        return value.replace(microsecond=value.microsecond // 1000 * 1000)

    def _customer_key(self) -> str:
        self._next_customer += 1
        letters = "".join(self.rng.choices("ABCDEFGHIJKLMNOPQRSTUVWXYZ", k=4))
        return f"{letters}{self._next_customer:04d}"

    def _money(self, low: int, high: int) -> Decimal:
        return Decimal(self.rng.randrange(low * 100, high * 100 + 1)).scaleb(-2)

    def _phone(self) -> str:
        r = self.rng
        return (
            f"+{r.randint(1, 99)} {r.randint(10, 99)} {r.randint(100, 999)} {r.randint(1000, 9999)}"
        )

    def _text(self) -> str:
        """A text long enough to be stored out of line (TOAST) in a STORAGE EXTERNAL column."""
        parts: list[str] = []
        while sum(len(p) + 1 for p in parts) < LONG_TEXT:
            parts.append(self.rng.choice(SENTENCES).format(n=self.rng.randint(2, 90)))
        return " ".join(parts)

    def _profile(self) -> dict[str, Any]:
        rng = self.rng
        return {
            "segment": rng.choice(["retail", "wholesale", "horeca"]),
            "languages": rng.sample(["de", "en", "es", "fr", "ja"], rng.randint(1, 3)),
            "score": rng.choice([0, 1.5, rng.randint(1, 100), None]),
            "address": {"city": rng.choice(["Berlin", "México D.F.", "Köln", "東京"])},
        }

    def _attributes(self) -> dict[str, Any]:
        rng = self.rng
        return {
            "organic": rng.random() < 0.3,
            "allergens": rng.sample(["milk", "nuts", "soy"], rng.randint(0, 2)),
        }

    def _bytes(self) -> bytes:
        return bytes(self.rng.getrandbits(8) for _ in range(self.rng.randint(0, 48)))


def dump_state(conn: Connection, tables: tuple[Table, ...] = TABLES) -> dict[str, list[dict]]:
    """Every table in canonical form, sorted by primary key: the oracle's expected state."""
    state: dict[str, list[dict]] = {}
    for table in tables:
        cursor = conn.execute(f"select * from {table.name} order by {', '.join(table.key)}")
        columns = [d.name for d in cursor.description]
        state[table.name] = [
            canonical_row(table, dict(zip(columns, row, strict=True))) for row in cursor
        ]
    return state
