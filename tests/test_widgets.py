"""The explorers: a static figure for the HTML book, and live controls that redraw."""
import matplotlib
import pytest

from icl_core.widgets import BaselineExplorer, LSAExplorer, MechanismExplorer, PreGDExplorer


@pytest.mark.parametrize("explorer, control_row, index, value, attr", [
    (BaselineExplorer(d=3, n_max=8, n_prompts=40), 0, 1, 12, "n_max"),
    (LSAExplorer(n_prompts=200), 0, 2, 2.0, "c"),
    (LSAExplorer(n_prompts=200), 1, 0, "identity", "train"),
    (PreGDExplorer(n_prompts=50), 1, 1, 0.5, "sigma"),
    (MechanismExplorer(), 0, 0, "gp", "family"),
])
def test_controls_redraw(explorer, control_row, index, value, attr):
    box = explorer.widget()
    image = box.children[-1]
    before = image.value
    box.children[control_row].children[index].value = value
    assert getattr(explorer, attr) == value
    assert image.value != before and image.value[:4] == b"\x89PNG"


def test_static_figures():
    for e in (BaselineExplorer(n_prompts=40), LSAExplorer(train="identity", test="identity", n_prompts=200),
              PreGDExplorer(n_prompts=50), MechanismExplorer(family="lipschitz", n=6)):
        fig = e.figure()
        assert isinstance(fig, matplotlib.figure.Figure)
        assert all(ax.get_xlabel() and ax.get_ylabel() for ax in fig.axes)


def test_sliders_redraw_on_release_and_respect_each_other():
    box = PreGDExplorer(d=16, s=4, n_prompts=20).widget()
    d_slider, s_slider = box.children[0].children
    sliders = [c for row in box.children[:-1] for c in row.children if hasattr(c, "continuous_update")]
    assert sliders and not any(c.continuous_update for c in sliders)
    assert s_slider.max == 16
    d_slider.value = 3                                  # s's range follows d; its value is clamped
    assert s_slider.max == 3 and s_slider.value == 3


def test_show_offers_the_live_widget_and_a_static_part_once():
    shown = BaselineExplorer(d=3, n_max=8, n_prompts=40).show(static=False)
    bundle = shown._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle         # Jupyter / Colab pick this
    assert bundle["text/html"].startswith('<img class="icl-explorer"')   # no kernel: the figure once
    assert "icl-player" not in bundle["text/html"]


def test_a_readers_kernel_draws_the_default_figure_once(monkeypatch):
    explorer = BaselineExplorer(d=3, n_max=8, n_prompts=40)
    drawn = []
    figure = explorer.figure
    monkeypatch.setattr(explorer, "figure", lambda: drawn.append(1) or figure())
    bundle = explorer.show(static=False)._repr_mimebundle_()
    assert len(drawn) == 1 and bundle["text/html"].startswith('<img class="icl-explorer"')


def test_static_player_has_a_frame_per_grid_combination(monkeypatch):
    import re

    import icl_core.widgets as W

    class Tiny(W._Explorer):                     # a cheap explorer: the frame shows its settings
        STATIC = {"a": [1, 2, 3], "kind": ["x", "y"]}

        def __init__(self):
            self.a, self.kind = 2, "y"

        def figure(self):
            fig, ax = matplotlib.pyplot.subplots(figsize=(2, 1))
            ax.set_title(f"{self.a} {self.kind}")
            return fig
    t = Tiny()
    grid, frames = t.frames()
    assert sorted(frames) == [f"{i},{j}" for i in range(3) for j in range(2)]
    assert len(set(frames.values())) == 6                       # every combination drawn apart
    assert (t.a, t.kind) == (2, "y")                            # the explorer is left as it was
    assert t.start(grid) == [1, 1]
    monkeypatch.setenv(W.STATIC_ENV, "1")
    html = t.show().html()
    assert html.count('data-k="') == 2 and 'type="range"' in html and "<select" in html
    assert len(re.findall(r'data:image/png;base64,', html)) == 6 + 1          # the frames and the first
    assert '<option value="1" selected>y</option>' in html
    monkeypatch.setenv(W.STATIC_ENV, "0")
    assert "icl-player" not in t.show().html()


def test_every_explorer_grid_names_its_attributes_and_stays_small():
    import icl_core.widgets as W
    for cls in (W.BaselineExplorer, W.LSAExplorer, W.WindowExplorer, W.FunctionalGDExplorer,
                W.PreGDExplorer, W.MechanismExplorer):
        e = cls()
        assert cls.STATIC and all(hasattr(e, name) for name in cls.STATIC), cls
        assert 4 <= len(list(__import__("itertools").product(*cls.STATIC.values()))) <= 24, cls
