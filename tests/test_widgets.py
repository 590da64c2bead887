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
