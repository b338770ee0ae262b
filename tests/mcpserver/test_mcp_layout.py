"""The proxy's block order (``_layout``): each text block gets the part of the window
that came from it, in the upstream's order, whatever the cut."""

from __future__ import annotations

import mcp_types as types
from hypothesis import assume, given
from hypothesis import strategies as st

from toolfold.mcp._layout import Layout, compose

texts_st = st.lists(st.text(alphabet="ab\n", max_size=12), min_size=1, max_size=5)


def _layout(texts: list[str], window: str, window_line: int = 0, *, cut: bool = False) -> Layout:
    layout = Layout()
    for n, text in enumerate(texts):
        layout.add_text(text)
        if n == 0:
            layout.slots.append(("image", 0))
    layout.window = window
    layout.window_line = window_line
    layout.cut = cut
    return layout


IMAGE = types.ImageContent(type="image", data="AAAA", mime_type="image/png")


@given(texts=texts_st)
def test_an_uncut_window_gives_back_every_block_in_place(texts: list[str]) -> None:
    joined = "\n".join(texts)
    assume(joined)  # an empty window shows no text block at all
    got = compose(_layout(texts, joined), joined, [IMAGE])
    assert got is not None
    assert [b.text if isinstance(b, types.TextContent) else b for b in got] == [
        texts[0],
        IMAGE,
        *texts[1:],
    ]


@given(texts=texts_st, cut=st.integers(0, 80))
def test_a_head_cut_keeps_a_prefix_of_each_block_and_ends_with_the_footer(
    texts: list[str], cut: int
) -> None:
    joined = "\n".join(texts)
    window = joined[:cut]
    assume(window)
    footer = "\n[cut]"
    got = compose(_layout(texts, window, cut=window != joined), window + footer, [IMAGE])
    assert got is not None
    shown = [b.text for b in got if isinstance(b, types.TextContent)]
    assert shown[-1].endswith(footer)
    shown[-1] = shown[-1].removesuffix(footer)
    # Each shown block is a prefix of its own text, the blocks come in order, and
    # together (with the newlines that joined them) they are the window.
    for piece, text in zip(shown, texts, strict=False):
        assert text.startswith(piece)
    rebuilt = "\n".join(shown)
    assert rebuilt == window or rebuilt + "\n" == window
    assert IMAGE in got
