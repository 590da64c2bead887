"""One drawing function per figure of the book, in the house style of
:mod:`icl_core.plotting`: ``draw(result, label) -> Figure``. A chapter's experiments page calls
the recipe, then the figure's function; the same function draws the live ``ci`` run and a
committed result (``python -m icl_core plot`` draws a saved result with it)."""


def figure_for(name: str, config: dict | None = None):
    """The drawing function of a saved result of recipe ``name`` (None if it has none of its
    own: Collins et al.'s Figures 3 and 4 are drawn together in the chapter)."""
    from . import cheng, collins, foundations, synthesis, zhang
    if name == "collins.figure1":      # the ci optimum view needs the windows; trained runs the errors
        return collins.figure1 if (config or {}).get("mode") != "train" else collins.figure1_paper
    return {"zhang.training": zhang.training, "zhang.error_vs_M": zhang.error_vs_M,
            "zhang.shifts": zhang.shifts, "zhang.figure1": zhang.figure1,
            "collins.figure5": collins.figure5, "collins.figure9": collins.figure9,
            "cheng.figure1": cheng.figure1, "cheng.figure2": cheng.figure2,
            "cheng.figure3": cheng.figure3, "cheng.figure4": cheng.depth_sweep,
            "foundations.error_vs_context": foundations.error_vs_context,
            "synthesis.compare": synthesis.error_curves}.get(name)
