"""The one place that chooses toolfold's JSON codec: ``orjson`` by default, or the
standard library's ``json`` for a process that asks for it before its first use.

Why two codecs. ``orjson`` is several times faster on large values (the asyncio path's
checkpoints and copies, JSONL, replication), but importing it costs a short process
about 3 ms: it imports ``json``, ``dataclasses`` (and with it ``inspect``, ``ast``,
``dis``, ``tokenize``), ``datetime``, ``enum`` and ``uuid`` (and ``platform``). ``toolfold
run -- COMMAND`` on its direct driver encodes a handful of small records per call and
then exits, so there the standard library is the cheaper codec.

Why a process-wide choice, made at first use. The codec is picked the first time one of
:data:`dumps`, :data:`dumps_sorted`, :data:`loads` or :data:`DecodeError` is read from
this module (a module ``__getattr__``; afterwards they are plain module attributes, so a
call costs what ``orjson.dumps`` did). :func:`prefer_standard_library` picks the
standard library instead, if nothing has picked yet: the direct driver calls it before
it imports storage. An encoder passed down would have to travel through storage, the
durability layer and the output sink for one caller; a switch keeps every layer's code
as it is. Either codec is correct everywhere, so the preference is only that: once
``orjson`` is in use it stays (a process that already paid for it gains nothing).
Callers therefore read the attributes through the module (``_json.dumps(v)``), never
``from toolfold._json import dumps``, which would pick at import time.

Why both are equal. Every value that reaches a store or the sink passed ``check_json``
(exact JSON types, ``str`` keys, finite floats, integers within ±(2**53 - 1), no lone
surrogates, bounded depth). For those values each codec decodes the other's encoding to
an equal value; the bytes may differ (``1e-05`` against ``0.00001``). Both encode
compactly as UTF-8, non-ASCII unescaped, and raise ``TypeError`` for what they cannot
encode (a lone surrogate, an object). Both decoders refuse, with :data:`DecodeError` (a
``json.JSONDecodeError``; ``orjson.JSONDecodeError`` is one too), what ``orjson``
refuses and a checked value never holds: ``NaN``, ``Infinity``, a number out of a
double's range, invalid UTF-8, a byte order mark, a lone surrogate escape. Outside the
checked values they differ: ``orjson`` writes ``NaN`` and infinities as ``null`` where
the standard library refuses them, and refuses non-``str`` keys and integers past 64
bits where the standard library writes them (and reads such integers exactly where
``orjson`` reads a float).

Imports nothing else from toolfold, so every layer may use it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

__all__ = [
    "Codec",
    "DecodeError",
    "codec_name",
    "dumps",
    "dumps_sorted",
    "loads",
    "orjson_codec",
    "prefer_standard_library",
    "standard_library_codec",
]

dumps: Callable[[Any], bytes]
"""Compact UTF-8 JSON of a value; ``TypeError`` if it cannot be encoded."""

dumps_sorted: Callable[[Any], bytes]
"""As :data:`dumps`, object keys sorted."""

loads: Callable[[bytes | bytearray | memoryview | str], Any]
"""The value of a JSON document; :data:`DecodeError` if it is not one."""

DecodeError: type[ValueError]
"""What :data:`loads` raises for malformed JSON (a ``json.JSONDecodeError``)."""

_CHOSEN = ("dumps", "dumps_sorted", "loads", "DecodeError")
_codec: str | None = None


class Codec:
    """One codec's functions, as this module installs them (and as tests compare them)."""

    __slots__ = ("decode_error", "dumps", "dumps_sorted", "loads", "name")

    def __init__(
        self,
        name: str,
        dumps: Callable[[Any], bytes],
        dumps_sorted: Callable[[Any], bytes],
        loads: Callable[[bytes | bytearray | memoryview | str], Any],
        decode_error: type[ValueError],
    ) -> None:
        self.name = name
        self.dumps = dumps
        self.dumps_sorted = dumps_sorted
        self.loads = loads
        self.decode_error = decode_error


def codec_name() -> str | None:
    """``"orjson"`` or ``"json"`` once the codec is chosen, ``None`` before."""
    return _codec


def prefer_standard_library() -> None:
    """Use the standard library's ``json`` in this process, unless a codec is already in
    use (then nothing changes). For a short process that encodes little."""
    if _codec is None:
        _install(standard_library_codec())


def __getattr__(name: str) -> object:
    if name in _CHOSEN:
        _install(orjson_codec())
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _install(codec: Codec) -> None:
    global _codec, dumps, dumps_sorted, loads, DecodeError
    dumps, dumps_sorted, loads = codec.dumps, codec.dumps_sorted, codec.loads
    DecodeError = codec.decode_error
    _codec = codec.name


def orjson_codec() -> Codec:
    """``orjson``'s functions (importing it)."""
    import orjson

    def sorted_dumps(value: Any) -> bytes:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)

    return Codec("orjson", orjson.dumps, sorted_dumps, orjson.loads, orjson.JSONDecodeError)


def standard_library_codec() -> Codec:
    """The standard library's ``json``, configured to read and write what ``orjson`` does
    (see the module's docstring)."""
    import json

    def encoder(*, sort_keys: bool) -> Callable[[Any], bytes]:
        encode = json.JSONEncoder(
            ensure_ascii=False, separators=(",", ":"), allow_nan=False, sort_keys=sort_keys
        ).encode

        def encoded(value: Any) -> bytes:
            try:
                return encode(value).encode()
            except ValueError as exc:  # NaN, a cycle, a lone surrogate: orjson's TypeError
                raise TypeError(str(exc)) from exc

        return encoded

    def no_constant(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    def finite(text: str) -> float:
        number = float(text)
        if math.isinf(number):
            raise ValueError(f"number {text} is out of a double's range")
        return number

    decode = json.JSONDecoder(parse_constant=no_constant, parse_float=finite).decode

    def decoded(data: bytes | bytearray | memoryview | str) -> Any:
        text = ""
        try:
            text = data if isinstance(data, str) else bytes(data).decode()
            if text.startswith("\ufeff"):
                raise ValueError("a byte order mark is not JSON")
            value = decode(text)
            if "\\ud" in text or "\\uD" in text:
                # Escapes of surrogates: a pair decodes to one character, a lone one is
                # left in a str, which no checked value holds and encode() refuses.
                json.dumps(value, ensure_ascii=False).encode()
        except json.JSONDecodeError:
            raise
        except (ValueError, RecursionError) as exc:
            raise json.JSONDecodeError(str(exc), text, 0) from exc
        return value

    return Codec(
        "json", encoder(sort_keys=False), encoder(sort_keys=True), decoded, json.JSONDecodeError
    )
