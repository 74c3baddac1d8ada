"""Rendering the pictures still missing before CLIP scoring: each distinct page once, its
picture written into every file that needs it (the real browser path: tests/cli/
test_evaluate_html.py)."""

from __future__ import annotations

from sweet_rl.rendering.pictures import Picture, render_pending
from sweet_rl.rendering.result import RenderResult


class _CountingPool:
    """Stands in for DriverPool: a different PNG for every render, so a shared picture shows."""

    size = 2
    renders = []

    def __init__(self, **kwargs):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def render(self, html):
        self.renders.append(html)
        return RenderResult(ok=True, png=f"{html}#{len(self.renders)}".encode(), width=1,
                            height=1, browser="fake 1")


def test_one_render_serves_the_answer_page_and_its_reference(tmp_path, monkeypatch):
    import sweet_rl.rendering.pool as pool

    monkeypatch.setattr(pool, "DriverPool", _CountingPool)
    _CountingPool.renders = []
    same_page, reference, other = (str(tmp_path / name) for name in
                                   ("page_a.png", "reference_a.png", "page_b.png"))
    pictures = [Picture(path=same_page, html="<p>a</p>"), Picture(path=reference, html="<p>a</p>"),
                Picture(path=other, html="<p>b</p>"), Picture(path=same_page, html="<p>a</p>")]
    outcome = render_pending(pictures)
    assert sorted(_CountingPool.renders) == ["<p>a</p>", "<p>b</p>"]  # each page drawn once
    assert open(same_page, "rb").read() == open(reference, "rb").read()
    assert open(other, "rb").read() != open(same_page, "rb").read()
    assert outcome["rendered"] == 3 and outcome["failed"] == 0  # counted in files
    assert all(not p.pending and p.error is None for p in pictures)
