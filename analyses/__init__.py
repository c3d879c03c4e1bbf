"""One module per analysis / figure: ``run(quick) -> data``, ``plot(data, outdir) -> files``,
``checks(data) -> list of dicts`` (keys result, setting, measured, theoretical, verdict).

``convkit figures`` runs them all and writes ``figures/``.
"""
