"""`cdc_lakehouse.<macro>(...)` for sqlfluff's jinja templater (library_path in .sqlfluff).

Models call the dbt package's macros by the package's name, as dbt requires; sqlfluff loads
those macros (load_macros_from_path) under their own names. Each attribute of this module calls
the macro of that name in the template being rendered, so a model lints with the macros' real
output, as `dbt compile` would render it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jinja2


def __getattr__(name: str) -> Callable[..., Any]:
    if name.startswith("__"):
        raise AttributeError(name)

    @jinja2.pass_context
    def call(context: jinja2.runtime.Context, *args: Any, **kwargs: Any) -> Any:
        return context[name](*args, **kwargs)

    return call
