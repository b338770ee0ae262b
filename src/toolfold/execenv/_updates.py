"""The shell output update vocabulary and its fold, ``apply_shell_output_update``.

A consumer starts from ``None`` and folds every published update; the result is
the bounded view (text + metadata). Character counts (``Slide.drop``) are Python
``str`` indices, i.e. Unicode code points of the view text — not bytes and not
UTF-16 units (a Chord-based consumer converts on its own).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeAlias

from toolfold._record import record

from ._errors import UpdateError
from ._output_view import ShellOutputMetadata, ShellOutputTruncation, ShellOutputView


@record(frozen=True, slots=True)
class Replace:
    """Replace the whole view (always bounded). The first update of a stream is one."""

    output: ShellOutputView


if TYPE_CHECKING:
    from ._deltas import Append, Metadata, Slide

    ShellOutputUpdate: TypeAlias = Replace | Append | Slide | Metadata

# The updates after a stream's first (Append, Slide, Metadata: _deltas) are defined on
# first use, and so is the ShellOutputUpdate union of the four (this module's
# __getattr__): a command that prints nothing publishes only its Replace.


def apply_shell_output_update(
    view: ShellOutputView | None, update: ShellOutputUpdate
) -> ShellOutputView:
    """Fold one update into ``view`` (``None`` before the first update) and return the new view.

    Raises ``UpdateError`` when the update cannot apply (text update before any
    ``Replace``, a ``Slide`` dropping more than the view holds, an unknown update).
    """
    if isinstance(update, Replace):
        return update.output
    if view is None:
        raise UpdateError(
            f"{type(update).__name__} update applied to no view: the first update of a "
            "stream must be a Replace; fold from the stream's first update"
        )
    from ._deltas import Append, Metadata, Slide

    if isinstance(update, Append):
        return ShellOutputView(text=view.text + update.text, metadata=update.metadata)
    if isinstance(update, Slide):
        at, drop = update.at, update.drop
        if (
            isinstance(drop, bool)
            or isinstance(at, bool)
            or not 0 <= at <= len(view.text)
            or not 0 <= drop <= len(view.text) - at
        ):
            where = f"at={at!r} drop={drop!r}" if at else f"drop={drop!r}"
            raise UpdateError(
                f"Slide {where} is outside the view of {len(view.text)} characters; "
                "the update belongs to a different stream or an update was missed"
            )
        text = view.text
        return ShellOutputView(
            text=(text[:at] + text[at + drop :] if at else text[drop:]) + update.text,
            metadata=update.metadata,
        )
    if isinstance(update, Metadata):
        return ShellOutputView(text=view.text, metadata=update.metadata)
    raise UpdateError(
        f"unknown shell output update {update!r}; expected Replace, Append, Slide or Metadata"
    )


def update_cost(update: ShellOutputUpdate) -> int:
    """An estimate of the encoded size of ``update`` in bytes (text as UTF-8 plus a fixed
    allowance for the metadata), used to pace publication."""
    if isinstance(update, Replace):
        return _METADATA_COST + utf8_len(update.output.text)
    from ._deltas import Append, Slide

    text = update.text if isinstance(update, Append | Slide) else ""
    return _METADATA_COST + utf8_len(text)


_METADATA_COST = 160


def utf8_len(text: str) -> int:
    """UTF-8 byte length of ``text`` (O(1) for ASCII-only strings)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


_TRUNCATION_FIELDS: dict[str, type | tuple[type, ...]] = {
    "truncated": bool,
    "truncated_by": (str, type(None)),
    "total_lines": int,
    "total_bytes": int,
    "output_lines": int,
    "output_bytes": int,
    "last_line_partial": bool,
    "first_line_exceeds_limit": bool,
    "max_lines": int,
    "max_bytes": int,
}


_CUT_FIELDS: dict[str, type | tuple[type, ...]] = {
    "cut_at": (int, type(None)),
    "cut_line": int,
    "cut_lines": int,
    "cut_bytes": int,
}
"""head_tail fields: on the wire only when ``cut_at`` is set, so the other modes' messages
are what they were (and an older peer, which never asks for head_tail, reads them)."""


def _truncation_to_dict(t: ShellOutputTruncation) -> dict[str, Any]:
    d = {name: getattr(t, name) for name in _TRUNCATION_FIELDS}
    if t.cut_at is not None:
        d.update({name: getattr(t, name) for name in _CUT_FIELDS})
    return d


def _metadata_to_dict(meta: ShellOutputMetadata) -> dict[str, Any]:
    t = meta.truncation
    return {
        "truncation": _truncation_to_dict(t),
        "spill_path": meta.spill_path,
        "last_line_bytes": meta.last_line_bytes,
        "spill_note": meta.spill_note,
    }


def update_to_dict(update: ShellOutputUpdate) -> dict[str, Any]:
    """A JSON-ready dict for ``update`` (for shipping updates from a remote exec host)."""
    if isinstance(update, Replace):
        return {
            "type": "replace",
            "text": update.output.text,
            "metadata": _metadata_to_dict(update.output.metadata),
        }
    from ._deltas import Append, Metadata, Slide

    if isinstance(update, Append):
        return {
            "type": "append",
            "text": update.text,
            "metadata": _metadata_to_dict(update.metadata),
        }
    if isinstance(update, Slide):
        d = {
            "type": "slide",
            "drop": update.drop,
            "text": update.text,
            "metadata": _metadata_to_dict(update.metadata),
        }
        if update.at:
            d["at"] = update.at
        return d
    if isinstance(update, Metadata):
        return {"type": "metadata", "metadata": _metadata_to_dict(update.metadata)}
    raise UpdateError(
        f"unknown shell output update {update!r}; expected Replace, Append, Slide or Metadata"
    )


def _field(d: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(d, dict) or key not in d:
        raise UpdateError(f"shell output update {where} has no {key!r} field; got {d!r:.200}")
    value = d[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise UpdateError(
            f"shell output update field {where}.{key} must be "
            f"{' or '.join(k.__name__ for k in kinds)}, got {value!r:.200}"
        )
    return value


def _metadata_from_dict(d: Any) -> ShellOutputMetadata:
    t = _field(d, "truncation", dict, "metadata")
    values = {
        name: _field(t, name, kind, "metadata.truncation")
        for name, kind in _TRUNCATION_FIELDS.items()
    }
    if "cut_at" in t:
        for name, kind in _CUT_FIELDS.items():
            values[name] = _field(t, name, kind, "metadata.truncation")
        for name in _CUT_FIELDS:
            if values[name] is not None and values[name] < 0:
                raise UpdateError(
                    f"shell output update field metadata.truncation.{name} must be >= 0, "
                    f"got {values[name]}"
                )
    if values["truncated_by"] not in (None, "lines", "bytes"):
        raise UpdateError(
            f"shell output update field metadata.truncation.truncated_by must be "
            f"'lines', 'bytes' or null, got {values['truncated_by']!r}"
        )
    return ShellOutputMetadata(
        truncation=ShellOutputTruncation(**values),
        spill_path=_field(d, "spill_path", (str, type(None)), "metadata"),
        last_line_bytes=_field(d, "last_line_bytes", (int, type(None)), "metadata"),
        # Optional on the wire: an exec host from before the spill cap does not send it.
        spill_note=_field(d, "spill_note", (str, type(None)), "metadata")
        if "spill_note" in d
        else None,
    )


def update_from_dict(d: Any) -> ShellOutputUpdate:
    """Inverse of ``update_to_dict``; raises ``UpdateError`` naming the bad field."""
    kind = _field(d, "type", str, "")
    meta = _metadata_from_dict(_field(d, "metadata", dict, kind))
    if kind == "replace":
        return Replace(ShellOutputView(text=_field(d, "text", str, kind), metadata=meta))
    from ._deltas import Append, Metadata, Slide

    if kind == "append":
        return Append(_field(d, "text", str, kind), meta)
    if kind == "slide":
        drop = _field(d, "drop", int, kind)
        if drop < 0:
            raise UpdateError(f"shell output update field slide.drop must be >= 0, got {drop}")
        at = _field(d, "at", int, kind) if "at" in d else 0
        if at < 0:
            raise UpdateError(f"shell output update field slide.at must be >= 0, got {at}")
        return Slide(drop, _field(d, "text", str, kind), meta, at)
    if kind == "metadata":
        return Metadata(meta)
    raise UpdateError(
        f"unknown shell output update type {kind!r}; expected replace, append, slide or metadata"
    )


def __getattr__(name: str) -> Any:
    """``Append``, ``Slide``, ``Metadata`` (``_deltas``) and the ``ShellOutputUpdate``
    union, defined on first use; importable from here as they always were."""
    if name not in ("Append", "Slide", "Metadata", "ShellOutputUpdate"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from . import _deltas

    value = (
        Replace | _deltas.Append | _deltas.Slide | _deltas.Metadata
        if name == "ShellOutputUpdate"
        else getattr(_deltas, name)
    )
    globals()[name] = value
    return value
