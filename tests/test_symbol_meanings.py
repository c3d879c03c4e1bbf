"""One meaning per symbol name (issue 30, item 8): every symbol of every registered result
(expression, conditions, variable) is in the table :data:`convkit.bounds.symbols.MEANINGS`,
and a name is one SymPy symbol (one set of assumptions) across the library; every result names
where its statement is."""

from __future__ import annotations

import sympy as sp

from convkit.bounds import get, names, symbol
from convkit.bounds.provenance import source_of
from convkit.bounds.symbols import MEANINGS


def _symbols(name: str) -> set[sp.Symbol]:
    r = get(name)
    syms = set(r.expression.free_symbols)
    for c in r.conditions:
        syms |= c.free_symbols
    if r.variable is not None:
        syms.add(r.variable)
    labels = {b.label for b in r.expression.atoms(sp.IndexedBase)}
    return {s for s in syms if isinstance(s, sp.Symbol) and s not in labels} | labels


def test_every_symbol_has_one_meaning():
    unknown = {n: sorted(s.name for s in _symbols(n) if s.name not in MEANINGS) for n in names()}
    unknown = {n: u for n, u in unknown.items() if u}
    assert not unknown, f"symbols without a meaning in convkit.bounds.symbols: {unknown}"


def test_a_name_is_one_symbol_across_the_library():
    """The same name never carries two sets of assumptions (two symbols that print alike);
    the labels of indexed spectra (h[i]) aside."""
    seen: dict[str, set[sp.Symbol]] = {}
    for n in names():
        labels = {b.label for b in get(n).expression.atoms(sp.IndexedBase)}
        for s in _symbols(n) - labels:
            seen.setdefault(s.name, set()).add(s)
    twice = {k: v for k, v in seen.items() if len(v) > 1}
    assert not twice, twice


def test_renamed_symbols():
    """delta named two things (compression quality, eigengap): now omega and gap; the
    momentum-like beta allows 0."""
    assert all("delta" not in {s.name for s in _symbols(n)} for n in names())
    assert {s.name for s in _symbols("choco.rate_strongly_convex")} >= {"gap", "omega"}
    assert "omega" in {s.name for s in _symbols("ef_sgd.memory")}
    assert "gap" in {s.name for s in _symbols("pu.transient_time")}
    assert symbol("beta").is_nonnegative and symbol("beta").is_positive is None


LOCATIONS = ("abstract", "Theorem", "Lemma", "Corollary", "equation", "review", "Section")


def test_every_result_names_where_its_statement_is():
    """A paper's statement names its location (abstract, theorem, lemma, ...), a derived
    result its derivation, a summary its summary."""
    for n in names():
        prov = get(n).provenance
        where = source_of(prov)
        assert (
            where in ("derived", "summary")
            or "derived here" in prov
            or any(w in prov for w in LOCATIONS)
        ), (n, prov)


def test_dpsgd_rate_cites_the_d2_abstract():
    prov = get("dpsgd.rate").provenance
    assert prov.startswith("Tang, Lian, Yan, Zhang, Liu 2018") and "abstract" in prov


def test_rows_of_results_from_a_summary_say_unverified_source():
    """Results known only from a summary keep their tag, and every check covering one passes
    its rows through note_sources: their reasons say 'unverified source'."""
    from convkit.bounds import CHECKS, COVERS
    from convkit.bounds.checking import UNVERIFIED

    summary = {n for n in names() if source_of(get(n).provenance) == "summary"}
    assert {"deepsqueeze.rate", "deepsqueeze.step_limit", "ef_sgd.memory"} <= summary
    for check, covers in COVERS.items():
        if summary & set(covers):
            assert hasattr(CHECKS[check], "__wrapped__"), check  # @noting_sources
    for check in ("compression.top_k", "compression.scaled_sign"):
        for r in CHECKS[check](True):
            assert r["reason"].endswith(f"[{UNVERIFIED}]"), r["reason"]
