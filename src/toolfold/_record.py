"""``record``: ``@dataclass`` without importing ``dataclasses``, and cheaper to define.

``@record(frozen=True)`` declares the class ``@dataclass(frozen=True)`` declares (the
running Python's semantics; ``tests/test_record.py`` compares them on 3.11 to 3.13): the
``__init__`` signature, defaults and ``default_factory``, ``field(init=False, repr=False,
compare=False, hash=..., kw_only=...)``, ``ClassVar`` annotations skipped (found in
strings as dataclass finds them), fields inherited from record and dataclass bases,
``__post_init__``, ``__eq__`` over the ``compare=True`` fields of the same class only
(``NotImplemented`` otherwise), ``__hash__`` (frozen and eq: the hash of those fields; eq
and not frozen: unhashable), ``__repr__`` (``QualName(field=value, ...)`` over the
``repr=True`` fields, recursion-safe), ``dataclasses.FrozenInstanceError``,
``slots=True`` (a new class; pickling of frozen slotted instances), ``__match_args__``,
the generated docstring, ``__replace__`` (3.13), the errors of a bad declaration, and
``dataclasses.fields/replace/asdict/is_dataclass`` (and orjson's dataclass encoding) on
its classes and instances. One difference: assigning an attribute that is not a field to
a frozen *slotted* record raises ``FrozenInstanceError``, where dataclass's
``__setattr__``, naming the class ``slots=True`` replaced, fails in ``super()`` with a
``TypeError``.

How it differs inside (``toolfold._record_class`` makes the class,
``toolfold._record_fields`` holds the fields and the descriptors):

- ``dataclasses`` is not imported (it imports ``inspect``, hence ``ast``, ``dis``,
  ``tokenize``...: ~5 ms of ``toolfold run -- true``). The class's ``__init__`` is
  compiled here from the very source dataclass writes (one ``exec`` a class, as
  dataclass). ``__dataclass_fields__``, ``__dataclass_params__`` and a generated
  ``__doc__`` are descriptors that, on first read (``dataclasses.fields(...)``, ``help``),
  import ``dataclasses`` (or ``inspect``), build the real ``Field``/params objects or the
  docstring and put them on the class in their own place. ``FrozenInstanceError`` is
  imported when one is raised. ``replace`` here is ``dataclasses.replace`` for records
  without the import.
- ``__eq__``, ``__hash__`` and ``__repr__`` start as stand-ins that, on a class's first
  comparison, hash or repr, compile the method dataclass generates and put it in their
  place: a record never compared, hashed or printed never pays for them, and after the
  first call they cost what dataclass's do. A frozen record's
  ``__setattr__``/``__delattr__`` are closures with the generated methods' conditions
  and errors instead of two more ``exec``.

Why: CPython's ``dataclasses`` compiles every generated method from source with its own
``exec`` (Python 3.11: ~0.34 ms to define a frozen, slotted four-field class; a record
~0.10 ms), it imports ``inspect`` on the way, and ``toolfold run -- true`` defines a few
dozen records before it runs anything (docs/BENCHMARKS.md, "fifth round" and "sixth
round"; ``benchmarks/bench_dataclass_cost.py``).

For type checkers ``record`` *is* ``dataclasses.dataclass``, ``field`` is
``dataclasses.field`` and ``replace`` is ``dataclasses.replace`` (the ``TYPE_CHECKING``
import below), so mypy sees every record as a dataclass. ``field`` is for records only
(``@dataclass`` does not know its objects; a record takes ``dataclasses.field`` too).
What records do not use goes to ``dataclasses.dataclass`` unchanged, which then is
imported: ``order=True``, ``unsafe_hash=True``, ``weakref_slot=True``, ``InitVar`` and
``KW_ONLY`` annotations, a base dataclass with ``InitVar`` fields. Imports nothing else
from toolfold.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__all__ = ["field", "record", "replace"]

if TYPE_CHECKING:
    from dataclasses import dataclass as record
    from dataclasses import field, replace
else:
    from toolfold._record_class import record, replace
    from toolfold._record_fields import field
