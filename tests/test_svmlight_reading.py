"""LIBSVM/svmlight reading: both parsers (scikit-learn's and the pure-Python one) refuse the
same files with the same errors, naming the file and the line: an empty file, a malformed or
non-finite entry, an index beyond the limit (before any array of that size exists), duplicate
or decreasing indices in a line.  Every file is written to tmp_path; nothing is downloaded."""

from __future__ import annotations

import numpy as np
import pytest

from convkit.problems import datasets as ds

PARSERS = [
    pytest.param(False, id="native"),
    pytest.param(True, id="sklearn"),
]


def _write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _load(path, use_sklearn, **kw):
    if use_sklearn:
        pytest.importorskip("sklearn")
    return ds.load_svmlight(path, use_sklearn=use_sklearn, **kw)


@pytest.mark.parametrize("use_sklearn", PARSERS)
@pytest.mark.parametrize("text", ["", "# only a comment\n\n   \n"], ids=["empty", "comments"])
def test_empty_file_refused(tmp_path, use_sklearn, text):
    path = _write(tmp_path, "empty.svm", text)
    with pytest.raises(ValueError, match=r"empty\.svm: no data rows"):
        _load(path, use_sklearn)


@pytest.mark.parametrize("use_sklearn", PARSERS)
@pytest.mark.parametrize(
    "body,line,what",
    [
        ("1 1:0.5\n1 x:y\n", 2, "malformed"),
        ("1 1:0.5\n\n-1 2:zz\n", 3, "malformed"),
        ("# c\n1 1:0.5\nabc 1:1\n", 3, "label"),
        ("1 1:0.5\n-1 2:nan\n", 2, "finite"),
        ("1 1:0.5\ninf 2:1\n", 2, "finite"),
        ("1 1:0.5\n1 -3:1\n", 2, "index"),
    ],
    ids=["pair", "after-blank", "label", "nan-value", "inf-label", "negative"],
)
def test_errors_name_file_and_line(tmp_path, use_sklearn, body, line, what):
    path = _write(tmp_path, "bad.svm", body)
    with pytest.raises(ValueError, match=rf"bad\.svm:{line}: .*{what}"):
        _load(path, use_sklearn)


@pytest.mark.parametrize("use_sklearn", PARSERS)
def test_zero_index_with_one_based_names_the_line(tmp_path, use_sklearn):
    path = _write(tmp_path, "zero.svm", "1 1:1\n-1 0:2 3:1\n")
    with pytest.raises(ValueError, match=r"zero\.svm:2: .*index 0"):
        _load(path, use_sklearn, zero_based=False)


@pytest.mark.parametrize("use_sklearn", PARSERS)
@pytest.mark.parametrize("index", ["3000000000", "99999999999999999999999", "100000001"])
def test_huge_index_refused_with_the_limit(tmp_path, use_sklearn, index):
    path = _write(tmp_path, "huge.svm", f"1 1:1\n-1 2:1 {index}:1\n")
    with pytest.raises(ValueError, match=r"huge\.svm:2: .*index .*max_features = 100000000"):
        _load(path, use_sklearn)


@pytest.mark.parametrize("use_sklearn", PARSERS)
def test_max_features_is_the_limit(tmp_path, use_sklearn):
    path = _write(tmp_path, "wide.svm", "1 1:1\n-1 50:1\n")
    assert _load(path, use_sklearn).d == 50
    with pytest.raises(ValueError, match=r"wide\.svm:2: .*index 50.*max_features = 10"):
        _load(path, use_sklearn, max_features=10)
    with pytest.raises(ValueError, match=r"max_features"):
        _load(path, use_sklearn, max_features=2**31)  # beyond LIBSVM's int index
    with pytest.raises(ValueError, match=r"n_features .*<= max_features"):
        _load(path, use_sklearn, n_features=100, max_features=60)


@pytest.mark.parametrize("use_sklearn", PARSERS)
@pytest.mark.parametrize("row", ["-1 2:1 2:5", "-1 3:1 2:5"], ids=["duplicate", "decreasing"])
def test_duplicate_or_unsorted_indices_refused(tmp_path, use_sklearn, row):
    # the LIBSVM format lists a row's indices in increasing order; the pure-Python reader used
    # to sum a duplicate (2:1 2:5 read as 6) where scikit-learn's refused it
    path = _write(tmp_path, "dup.svm", f"1 1:1\n{row}\n")
    with pytest.raises(ValueError, match=r"dup\.svm:2: .*strictly increasing"):
        _load(path, use_sklearn)


@pytest.mark.parametrize("use_sklearn", PARSERS)
def test_n_features_too_small_names_the_line(tmp_path, use_sklearn):
    path = _write(tmp_path, "narrow.svm", "1 1:1\n-1 2:1\n1 1:1\n")
    with pytest.raises(ValueError, match=r"narrow\.svm:2: .*n_features = 1"):
        _load(path, use_sklearn, n_features=1)


def test_both_parsers_agree_on_a_valid_file(tmp_path):
    pytest.importorskip("sklearn")
    text = "# head\n+1 1:0.5 3:-1.25 # tail\n-1\n+1 qid:2 2:1e-3 4:7\n\n-1 1:2\n"
    path = _write(tmp_path, "ok.svm", text)
    a = ds.load_svmlight(path, use_sklearn=False)
    b = ds.load_svmlight(path, use_sklearn=True)
    np.testing.assert_array_equal(a.X.toarray(), b.X.toarray())
    np.testing.assert_array_equal(a.y, b.y)
    assert a.X.shape == (4, 4)


def test_an_open_file_is_refused_with_what_to_pass(tmp_path):
    # scikit-learn's reader takes an open file; ours needs the path, and says so (it was
    # "TypeError: expected str, bytes or os.PathLike object, not TextIOWrapper")
    path = tmp_path / "d.svm"
    path.write_text("1 1:0.5\n-1 2:1.5\n")
    with open(path) as fh, pytest.raises(
        TypeError, match=r"path must be the path of an svmlight file .*got an open file "
        r"\(TextIOWrapper\).*load_svmlight\(f\.name\)"
    ):
        ds.load_svmlight(fh)
    assert ds.load_svmlight(path).X.shape == (2, 2)
