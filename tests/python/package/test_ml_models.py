"""Classic-ML models (ai.onnx.ml) against onnxruntime: models converted by the
real converters (scikit-learn through skl2onnx, LightGBM through
onnxmltools) and hand-made ones covering the attribute variants of Scaler,
Normalizer, LinearRegressor, LinearClassifier, TreeEnsembleRegressor and
TreeEnsembleClassifier (post transforms, base values, string and int labels,
the binary cases, missing values, _as_tensor attributes); a negative
dim_value is an unknown dim. The converted library models also run through
the onnx-run CLI (check_cli), which must write the session's outputs."""
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import onyx

ML = "ai.onnx.ml"


def ort_run(model_bytes, feeds):
    return ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"]).run(None, feeds)


def check_cli(model, feeds, got, tmp_path):
    """Runs the model through the onnx-run CLI (inputs as .npy files) and
    requires the outputs it writes (.npy for tensors, .json for sequences
    of maps) to equal the Python session's `got`, output by output."""
    import json
    import os
    import subprocess

    data = model.SerializeToString() if hasattr(model, "SerializeToString") else model
    path = tmp_path / "cli.onnx"
    path.write_bytes(data)
    args = []
    for name, value in feeds.items():
        np.save(tmp_path / f"cli_in_{name}.npy", value)
        args += ["--input", f"{name}={tmp_path / f'cli_in_{name}.npy'}"]
    bin_dir = os.environ.get("ONYX_BIN_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "..", "build", "tools"))
    out = tmp_path / "cli_out"
    r = subprocess.run([os.path.join(bin_dir, "onnx-run"), str(path), *args, "--output-dir", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    graph = onnx.load_from_string(data).graph
    for i, o in enumerate(graph.output):
        if isinstance(got[i], list):  # a sequence of maps: JSON, keys as strings
            maps = json.loads((out / f"{o.name}.json").read_text())
            assert [list(m) for m in maps] == [[str(k) for k in g] for g in got[i]], o.name
            for m, g in zip(maps, got[i]):
                np.testing.assert_allclose(list(m.values()), list(g.values()), rtol=1e-6, err_msg=o.name)
            continue
        cli = np.load(out / f"{o.name}.npy")
        # strings: numpy's unicode dtype in the file, objects from the session
        same_type = cli.dtype == got[i].dtype or (cli.dtype.kind == "U" and got[i].dtype.kind == "O")
        assert cli.shape == got[i].shape and same_type, (o.name, cli.dtype, got[i].dtype)
        assert cli.tolist() == got[i].tolist(), o.name


def check_same(model, feeds, rtol=1e-5, atol=1e-6):
    data = model.SerializeToString() if hasattr(model, "SerializeToString") else model
    want = ort_run(data, feeds)
    got = onyx.InferenceSession(data).run(None, feeds)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        if isinstance(w, list):  # a sequence of maps (ZipMap)
            assert isinstance(g, list) and len(g) == len(w), i
            for gm, wm in zip(g, w):
                assert list(gm) == list(wm), i
                np.testing.assert_allclose(list(gm.values()), list(wm.values()), rtol=rtol, atol=atol)
            continue
        assert g.shape == w.shape, (i, g.shape, w.shape)
        if w.dtype.kind in "OU":
            assert g.tolist() == w.tolist(), i
        elif w.dtype.kind in "iub":
            assert g.dtype == w.dtype and np.array_equal(g, w), (i, g, w)
        else:
            assert g.dtype == w.dtype, (i, g.dtype, w.dtype)
            # onnxruntime sums in float32, Onyx in float64: cancellation in
            # float32 costs about 1e-7 of the largest term
            scale = float(np.max(np.abs(w))) if w.size else 0.0
            np.testing.assert_allclose(g, w, rtol=rtol, atol=max(atol, 1e-6 * scale), err_msg=f"output {i}")
    return got


# ---- models made by the converters ----

def sklearn_models():
    from sklearn.datasets import make_classification, make_regression
    from sklearn.ensemble import (GradientBoostingClassifier, GradientBoostingRegressor,
                                  HistGradientBoostingClassifier, HistGradientBoostingRegressor,
                                  RandomForestClassifier, RandomForestRegressor)
    from sklearn.linear_model import LinearRegression, LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import MinMaxScaler, Normalizer, StandardScaler

    x3, y3 = make_classification(300, 6, n_informative=4, n_classes=3, random_state=0)
    x2, y2 = make_classification(300, 6, random_state=1)
    xr, yr = make_regression(300, 6, random_state=0)
    ys = np.array(["cat", "dog", "eel"])[y3]
    # Missing values, which HistGradientBoosting routes by its learnt
    # direction (the converter writes it as BRANCH_*'s missing-value flags).
    nan3, nan2, nanr = x3.copy(), x2.copy(), xr.copy()
    for a in (nan3, nan2, nanr):
        a[np.random.default_rng(0).random(a.shape) < 0.15] = np.nan
    return {
        "scaler_logreg": (make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)), x3, y3),
        "logreg_binary": (LogisticRegression(), x2, y2),
        "logreg_strings": (LogisticRegression(max_iter=500), x3, ys),
        "normalizer_linreg": (make_pipeline(Normalizer(), LinearRegression()), xr, yr),
        "minmax_linreg": (make_pipeline(MinMaxScaler(), LinearRegression()), xr, yr),
        "random_forest": (RandomForestClassifier(8, max_depth=5, random_state=0), x3, y3),
        "random_forest_binary": (RandomForestClassifier(8, max_depth=5, random_state=0), x2, y2),
        "random_forest_strings": (RandomForestClassifier(4, max_depth=4, random_state=0), x3, ys),
        "random_forest_regressor": (RandomForestRegressor(6, max_depth=5, random_state=0), xr, yr),
        "gradient_boosting": (GradientBoostingClassifier(n_estimators=8, random_state=0), x3, y3),
        "gradient_boosting_binary": (GradientBoostingClassifier(n_estimators=8, random_state=0), x2, y2),
        "gradient_boosting_regressor": (GradientBoostingRegressor(n_estimators=12, random_state=0), xr, yr),
        "hist_gradient_boosting": (HistGradientBoostingClassifier(max_iter=10, random_state=0), nan3, y3),
        "hist_gradient_boosting_binary": (HistGradientBoostingClassifier(max_iter=10, random_state=0), nan2, y2),
        "hist_gradient_boosting_regressor": (HistGradientBoostingRegressor(max_iter=12, random_state=0), nanr, yr),
    }


SKLEARN = sorted(sklearn_models())


def bools_as_ints(monkeypatch):
    """skl2onnx 1.20 writes HistGradientBoosting's missing-value flags as a
    list mixing numpy uint8 and Python bools (False for leaves), which onnx's
    make_node refuses (an AttributeProto's ints): the flags are passed on as
    0/1, which is what the converter means (nodes_missing_value_tracks_true)."""
    from skl2onnx.common import _container

    make_node = _container.make_node

    def fixed(*args, **attrs):
        for k, v in attrs.items():
            if (isinstance(v, (list, tuple)) and any(isinstance(e, (bool, np.bool_)) for e in v)
                    and all(isinstance(e, (bool, int, np.bool_, np.integer)) for e in v)):
                attrs[k] = [int(e) for e in v]
        return make_node(*args, **attrs)

    monkeypatch.setattr(_container, "make_node", fixed)


@pytest.mark.parametrize("name", SKLEARN)
def test_sklearn_models_match_onnxruntime(name, monkeypatch, tmp_path):
    from skl2onnx import to_onnx

    if name.startswith("hist_"):
        bools_as_ints(monkeypatch)
    est, x, y = sklearn_models()[name]
    x = x.astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(x, y)
        opts = {"zipmap": False} if hasattr(est, "predict_proba") else None
        model = to_onnx(est, x[:1], target_opset={"": 17, ML: 3}, options={id(est): opts} if opts else None)
    ops = {n.op_type for n in model.graph.node}
    assert "ZipMap" not in ops, ops
    got = check_same(model, {model.graph.input[0].name: x[:40]})
    check_cli(model, {model.graph.input[0].name: x[:40]}, got, tmp_path)
    if hasattr(est, "predict_proba"):
        assert got[0].tolist() == est.predict(x[:40]).tolist()


@pytest.mark.parametrize("n", [1, 5, 40, 200])
def test_tree_walks_of_every_batch_size(n):
    """tree_ensemble walks blocks of rows through each tree (more than 64
    rows), chunks of trees for few rows, 8 walks in lockstep where a tree's
    leaves lie at about one depth (a random forest) and one at a time where
    they do not (LightGBM's leaf-wise trees), with NaN routed by the missing
    flags: every batch size matches onnxruntime, and each row alone gives
    its row of the batch. The larger forest and LightGBM model give a
    single row enough walks to split the trees between threads (chunks
    combined in order)."""
    lightgbm = pytest.importorskip("lightgbm")  # installed by the test command: never skipped in CI
    import onnxmltools
    from onnxmltools.convert.common.data_types import FloatTensorType
    from sklearn.datasets import make_classification
    from sklearn.ensemble import RandomForestClassifier
    from skl2onnx import to_onnx

    x, y = make_classification(400, 8, n_informative=5, n_classes=3, random_state=2)
    x = x.astype(np.float32)
    xn = x.copy()
    xn[np.random.default_rng(1).random(x.shape) < 0.1] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rf = RandomForestClassifier(37, max_depth=7, random_state=0).fit(x, y)
        lg = lightgbm.LGBMClassifier(n_estimators=13, num_leaves=15, verbose=-1).fit(xn, y)
        rf_big = RandomForestClassifier(300, max_depth=7, random_state=1).fit(x, y)
        lg_big = lightgbm.LGBMClassifier(n_estimators=150, num_leaves=15, verbose=-1).fit(xn, y)
    models = [(to_onnx(rf, x[:1], target_opset={"": 17, ML: 3}, options={id(rf): {"zipmap": False}}), x),
              (onnxmltools.convert_lightgbm(lg, initial_types=[("input", FloatTensorType([None, 8]))],
                                            target_opset=15, zipmap=False), xn),
              (to_onnx(rf_big, x[:1], target_opset={"": 17, ML: 3}, options={id(rf_big): {"zipmap": False}}), x),
              (onnxmltools.convert_lightgbm(lg_big, initial_types=[("input", FloatTensorType([None, 8]))],
                                            target_opset=15, zipmap=False), xn)]
    for model, data in models:
        name = model.graph.input[0].name
        got = check_same(model, {name: data[:n]}, rtol=1e-5, atol=1e-5)
        sess = onyx.InferenceSession(model.SerializeToString())
        for i in range(0, n, max(1, n // 7)):
            one = sess.run(None, {name: data[i:i + 1]})
            assert one[0][0] == got[0][i]
            np.testing.assert_allclose(one[1][0], got[1][i], rtol=1e-6, atol=1e-7)


def test_lightgbm_models_match_onnxruntime(tmp_path):
    lightgbm = pytest.importorskip("lightgbm")  # installed by the test command: never skipped in CI
    import onnxmltools
    from onnxmltools.convert.common.data_types import FloatTensorType
    from sklearn.datasets import make_classification, make_regression

    x3, y3 = make_classification(300, 6, n_informative=4, n_classes=3, random_state=0)
    x2, y2 = make_classification(300, 6, random_state=1)
    xr, yr = make_regression(300, 6, random_state=0)
    cases = [(lightgbm.LGBMClassifier(n_estimators=6, verbose=-1), x3, y3),
             (lightgbm.LGBMClassifier(n_estimators=6, verbose=-1), x2, y2),
             (lightgbm.LGBMRegressor(n_estimators=6, verbose=-1), xr, yr)]
    for est, x, y in cases:
        x = x.astype(np.float32)
        est.fit(x, y)
        model = onnxmltools.convert_lightgbm(est, initial_types=[("input", FloatTensorType([None, 6]))],
                                             target_opset=15, zipmap=False)
        got = check_same(model, {"input": x[:40]}, rtol=1e-5, atol=1e-5)
        check_cli(model, {"input": x[:40]}, got, tmp_path)


# ---- hand-made models ----

def ml_model(node, inputs, outputs, ml_opset=3):
    g = helper.make_graph([node], "ml", inputs, outputs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, ml_opset)],
                             ir_version=8)


def fx(n=4):
    return helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, n])


def rows(n=4, count=30, seed=0, nan=False):
    x = np.random.default_rng(seed).normal(size=(count, n)).astype(np.float32)
    if nan:
        x[::5, 0] = np.nan
    return x


@pytest.mark.parametrize("norm", ["MAX", "L1", "L2"])
def test_normalizer(norm):
    node = helper.make_node("Normalizer", ["x"], ["y"], domain=ML, norm=norm)
    x = rows()
    x[3] = 0  # a zero row stays as it is
    check_same(ml_model(node, [fx()], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]), {"x": x})


def test_scaler_with_per_feature_and_single_values():
    for offset, scale in (([0.5, -1, 2, 0], [2, 0.5, 1, 3]), ([1.5], [0.25])):
        node = helper.make_node("Scaler", ["x"], ["y"], domain=ML, offset=offset, scale=scale)
        check_same(ml_model(node, [fx()], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]),
                   {"x": rows()})


@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"])
@pytest.mark.parametrize("targets", [1, 2])
def test_linear_regressor(post, targets):
    rng = np.random.default_rng(targets)
    coef = rng.normal(size=targets * 4).tolist()
    node = helper.make_node("LinearRegressor", ["x"], ["y"], domain=ML, coefficients=coef,
                            intercepts=rng.normal(size=targets).tolist(), targets=targets, post_transform=post)
    x = rows() * 0.1 if post == "PROBIT" else rows()
    if post == "PROBIT":  # probit of values in (0, 1)
        node = helper.make_node("LinearRegressor", ["x"], ["y"], domain=ML, coefficients=[c * 0.05 for c in coef],
                                intercepts=[0.5] * targets, targets=targets, post_transform=post)
    # onnxruntime's probit is a float32 approximation of erfinv (off by up to
    # about 5e-4 near 0.5); Onyx's is exact to double precision
    atol = 1e-3 if post == "PROBIT" else 1e-5
    check_same(ml_model(node, [fx()], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]), {"x": x},
               rtol=1e-5, atol=atol)


@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"])
@pytest.mark.parametrize("kind", ["multi_ints", "multi_strings", "binary_ints", "binary_strings", "one_column"])
def test_linear_classifier(post, kind):
    rng = np.random.default_rng(3)
    classes = 1 if kind.startswith(("binary", "one")) else 3
    attrs = dict(coefficients=rng.normal(size=classes * 4).tolist(), intercepts=rng.normal(size=classes).tolist(),
                 post_transform=post)
    n_labels = 2 if kind.startswith("binary") else (3 if classes == 3 else 1)
    if kind.endswith("strings"):
        attrs["classlabels_strings"] = ["a", "b", "c"][:n_labels]
        label = helper.make_tensor_value_info("label", TensorProto.STRING, None)
    else:
        attrs["classlabels_ints"] = [5, 7, 9][:n_labels]
        label = helper.make_tensor_value_info("label", TensorProto.INT64, None)
    node = helper.make_node("LinearClassifier", ["x"], ["label", "scores"], domain=ML, **attrs)
    if kind == "one_column":  # one coefficient row is binary: onnxruntime and Onyx both want 2 labels
        m = ml_model(node, [fx()], [label, helper.make_tensor_value_info("scores", TensorProto.FLOAT, None)])
        with pytest.raises(Exception, match="2"):
            ort_run(m.SerializeToString(), {"x": rows()})
        with pytest.raises(onyx.OnyxError, match="needs 2 class labels"):
            onyx.InferenceSession(m.SerializeToString()).run(None, {"x": rows()})
        return
    check_same(ml_model(node, [fx()], [label, helper.make_tensor_value_info("scores", TensorProto.FLOAT, None)]),
               {"x": rows()})


def tree_attrs(prefix, ids_per_leaf, rng, as_tensor=False):
    """Two trees of depth 2 on 4 features (node ids 0..6 each), leaf weights
    for the ids in ids_per_leaf (a list per leaf: (id, weight))."""
    a = {k: [] for k in ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_values", "nodes_modes",
                         "nodes_truenodeids", "nodes_falsenodeids", "nodes_missing_value_tracks_true")}
    w = {f"{prefix}_treeids": [], f"{prefix}_nodeids": [], f"{prefix}_ids": [], f"{prefix}_weights": []}
    modes = ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ"]
    leaf = 0
    for t in range(2):
        for nid in range(7):
            a["nodes_treeids"].append(t)
            a["nodes_nodeids"].append(nid)
            if nid < 3:
                a["nodes_featureids"].append(int(rng.integers(0, 4)))
                a["nodes_values"].append(float(rng.normal()) * 0.5)
                a["nodes_modes"].append(modes[(t * 3 + nid) % 4] if nid else "BRANCH_LEQ")
                a["nodes_truenodeids"].append(2 * nid + 1)
                a["nodes_falsenodeids"].append(2 * nid + 2)
                a["nodes_missing_value_tracks_true"].append(int(nid == 0 and t == 0))
            else:
                a["nodes_featureids"].append(0)
                a["nodes_values"].append(0.0)
                a["nodes_modes"].append("LEAF")
                a["nodes_truenodeids"].append(0)
                a["nodes_falsenodeids"].append(0)
                a["nodes_missing_value_tracks_true"].append(0)
                for cid, weight in ids_per_leaf[leaf % len(ids_per_leaf)]:
                    w[f"{prefix}_treeids"].append(t)
                    w[f"{prefix}_nodeids"].append(nid)
                    w[f"{prefix}_ids"].append(cid)
                    w[f"{prefix}_weights"].append(weight)
                leaf += 1
    a.update(w)
    if as_tensor:
        for k in ("nodes_values", f"{prefix}_weights"):
            a[k + "_as_tensor"] = helper.make_tensor(k, TensorProto.DOUBLE, [len(a[k])], a.pop(k))
    return a


@pytest.mark.parametrize("agg", ["SUM", "AVERAGE", "MIN", "MAX"])
@pytest.mark.parametrize("targets,post", [(1, "NONE"), (2, "NONE"), (2, "SOFTMAX"), (3, "LOGISTIC")])
def test_tree_ensemble_regressor(agg, targets, post):
    rng = np.random.default_rng(7)
    leaves = [[(k, float(rng.normal())) for k in range(targets) if (j + k) % 3] or [(0, 0.3)] for j in range(8)]
    attrs = tree_attrs("target", leaves, rng)
    base = [0.25 * (k + 1) for k in range(targets)]
    node = helper.make_node("TreeEnsembleRegressor", ["x"], ["y"], domain=ML, n_targets=targets,
                            aggregate_function=agg, post_transform=post, base_values=base, **attrs)
    check_same(ml_model(node, [fx()], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]),
               {"x": rows(nan=True)})


def test_tree_ensemble_regressor_as_tensor_and_probit():
    # double thresholds and weights (_as_tensor) take double inputs in onnxruntime
    rng = np.random.default_rng(9)
    attrs = tree_attrs("target", [[(0, 0.1)], [(0, 0.2)], [(0, 0.05)], [(0, 0.3)]], rng, as_tensor=True)
    node = helper.make_node("TreeEnsembleRegressor", ["x"], ["y"], domain=ML, n_targets=1,
                            post_transform="PROBIT", **attrs)
    x = helper.make_tensor_value_info("x", TensorProto.DOUBLE, [None, 4])
    check_same(ml_model(node, [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]),
               {"x": rows().astype(np.float64)}, rtol=1e-5, atol=1e-3)


CLASSIFIER_CASES = {
    # name: (labels, leaves, base_values, post)
    "multi": ([0, 1, 2], [[(0, 0.5), (1, 0.2)], [(2, 0.9)], [(1, 0.4), (2, 0.1)], [(0, 0.3)]], [0.1, 0.2, 0.3],
              "SOFTMAX"),
    "multi_logistic_no_base": ([3, 5, 8], [[(0, 0.5), (1, -0.2)], [(2, 0.9)], [(1, 0.4)], [(0, 0.3), (2, 0.2)]],
                               [], "LOGISTIC"),
    "binary_positive": ([0, 1], [[(1, 0.2)], [(1, 0.4)], [(1, 0.1)], [(1, 0.35)]], [], "NONE"),
    "binary_mixed_logistic": ([0, 1], [[(1, -0.7)], [(1, 0.4)], [(1, 1.1)], [(1, -0.2)]], [], "LOGISTIC"),
    "binary_mixed_base1": ([0, 1], [[(0, -0.7)], [(0, 0.4)], [(0, 1.1)], [(0, -0.2)]], [0.3], "LOGISTIC"),
    "binary_two_columns": ([0, 1], [[(0, 0.7), (1, 0.3)], [(0, 0.2), (1, 0.8)]], [], "NONE"),
    "binary_base2": ([0, 1], [[(1, -0.7)], [(1, 0.4)], [(1, 1.1)], [(1, -0.2)]], [0.0, -0.1], "LOGISTIC"),
    "strings_multi": (["x", "y", "z"], [[(0, 0.5)], [(2, 0.9)], [(1, 0.4)], [(0, 0.3), (1, 0.6)]], [], "NONE"),
    "strings_binary": (["no", "yes"], [[(1, 0.2)], [(1, 0.7)], [(1, 0.1)], [(1, 0.9)]], [], "NONE"),
}


@pytest.mark.parametrize("case", sorted(CLASSIFIER_CASES))
def test_tree_ensemble_classifier(case):
    labels, leaves, base, post = CLASSIFIER_CASES[case]
    rng = np.random.default_rng(11)
    attrs = tree_attrs("class", leaves, rng)
    if isinstance(labels[0], str):
        attrs["classlabels_strings"] = labels
        label = helper.make_tensor_value_info("label", TensorProto.STRING, None)
    else:
        attrs["classlabels_int64s"] = labels
        label = helper.make_tensor_value_info("label", TensorProto.INT64, None)
    if base:
        attrs["base_values"] = base
    node = helper.make_node("TreeEnsembleClassifier", ["x"], ["label", "scores"], domain=ML, post_transform=post,
                            **attrs)
    check_same(ml_model(node, [fx()], [label, helper.make_tensor_value_info("scores", TensorProto.FLOAT, None)]),
               {"x": rows(nan=True)})


def test_bad_trees_are_one_line_errors():
    rng = np.random.default_rng(1)
    attrs = tree_attrs("target", [[(0, 1.0)]], rng)
    attrs["nodes_truenodeids"][0] = 42
    node = helper.make_node("TreeEnsembleRegressor", ["x"], ["y"], domain=ML, n_targets=1, **attrs)
    model = ml_model(node, [fx()], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    with pytest.raises(onyx.OnyxError, match=r"true child 42") as e:
        onyx.InferenceSession(model.SerializeToString()).run(None, {"x": rows()})
    assert "\n" not in str(e.value) and "TreeEnsembleRegressor" in str(e.value)
    attrs = tree_attrs("target", [[(0, 1.0)]], rng)
    attrs["nodes_truenodeids"][1] = 0  # node 1 of tree 0 points back at the root
    node = helper.make_node("TreeEnsembleRegressor", ["x"], ["y"], domain=ML, n_targets=1, **attrs)
    model = ml_model(node, [fx()], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    with pytest.raises(onyx.OnyxError, match=r"cycle|not reachable"):
        onyx.InferenceSession(model.SerializeToString()).run(None, {"x": rows()})


def test_negative_dim_value_is_an_unknown_dim():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [-1, 3])
    x.type.tensor_type.shape.dim[0].ClearField("dim_param")
    x.type.tensor_type.shape.dim[0].dim_value = -1
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    with pytest.warns(UserWarning, match=r"input 'x' declares dim_value -1 at axis 0"):
        sess = onyx.InferenceSession(m.SerializeToString())
    assert sess.get_inputs()[0].shape[0] is None
    data = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    np.testing.assert_array_equal(sess.run(None, {"x": data})[0], np.maximum(data, 0))
    with pytest.raises(onyx.OnyxError, match="axis 1"):
        sess.run(None, {"x": np.zeros((2, 4), np.float32)})


# ---- ZipMap: sequences of maps ----

@pytest.mark.parametrize("name", ["scaler_logreg", "random_forest_strings", "gradient_boosting_binary"])
def test_zipmap_outputs_are_lists_of_dicts_as_in_onnxruntime(name, tmp_path):
    from skl2onnx import to_onnx

    est, x, y = sklearn_models()[name]
    x = x.astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(x, y)
        model = to_onnx(est, x[:1], target_opset={"": 17, ML: 3})  # the converter's default: ZipMap
    assert "ZipMap" in {n.op_type for n in model.graph.node}
    data = model.SerializeToString()
    feeds = {model.graph.input[0].name: x[:12]}
    want = ort_run(data, feeds)
    sess = onyx.InferenceSession(data)
    got = sess.run(None, feeds)
    assert sess.get_outputs()[1].type == ort.InferenceSession(data).get_outputs()[1].type
    assert got[0].tolist() == want[0].tolist()
    assert isinstance(got[1], list) and len(got[1]) == 12
    for g, w in zip(got[1], want[1]):
        assert list(g) == list(w)  # the same keys (int or str), in order
        np.testing.assert_allclose(list(g.values()), list(w.values()), rtol=1e-5, atol=1e-6)
    check_cli(model, feeds, got, tmp_path)


def test_onnx_run_writes_maps_as_json(tmp_path):
    import json
    import os
    import subprocess

    from skl2onnx import to_onnx

    est, x, y = sklearn_models()["logreg_strings"]
    x = x.astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(x, y)
        model = to_onnx(est, x[:1], target_opset={"": 17, ML: 3})
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    np.save(tmp_path / "x.npy", x[:3])
    bin_dir = os.environ.get("ONYX_BIN_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "..", "build", "tools"))
    out = tmp_path / "out"
    name = model.graph.input[0].name
    r = subprocess.run([os.path.join(bin_dir, "onnx-run"), str(path), "--input", f"{name}={tmp_path / 'x.npy'}",
                        "--output-dir", str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    prob_name = model.graph.output[1].name
    assert "sequence of 3 maps (string -> float32, 3 keys)" in r.stdout
    labels = np.load(out / f"{model.graph.output[0].name}.npy")  # strings as numpy's unicode dtype
    assert labels.dtype.kind == "U" and labels.tolist() == est.predict(x[:3]).tolist()
    maps = json.loads((out / f"{prob_name}.json").read_text())
    want = ort_run(model.SerializeToString(), {name: x[:3]})[1]
    assert [list(m) for m in maps] == [list(w) for w in want]
    for m, w in zip(maps, want):
        np.testing.assert_allclose(list(m.values()), list(w.values()), rtol=1e-5)


def test_onnx_run_reads_and_writes_string_npy(tmp_path):
    import os
    import subprocess

    g = helper.make_graph([helper.make_node("Identity", ["s"], ["t"])], "g",
                          [helper.make_tensor_value_info("s", TensorProto.STRING, [None])],
                          [helper.make_tensor_value_info("t", TensorProto.STRING, [None])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(tmp_path / "id.onnx"))
    words = np.array(["", "a", "héllo wörld", "日本語", "🙂x"])
    np.save(tmp_path / "s.npy", words)
    bin_dir = os.environ.get("ONYX_BIN_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "..", "build", "tools"))
    r = subprocess.run([os.path.join(bin_dir, "onnx-run"), str(tmp_path / "id.onnx"), "--input",
                        f"s={tmp_path / 's.npy'}", "--output-dir", str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert np.load(tmp_path / "out" / "t.npy").tolist() == words.tolist()


def test_onnx_run_checks_expected_sequences_of_maps(tmp_path):
    """A test_data_set whose expected ZipMap output is a SequenceProto of
    MapProto: onnx-run --test-data reads it by the declared type, matches
    onnxruntime's values, and reports a changed value."""
    import os
    import subprocess

    from onnx import numpy_helper
    from skl2onnx import to_onnx

    est, x, y = sklearn_models()["scaler_logreg"]
    x = x.astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(x, y)
        model = to_onnx(est, x[:1], target_opset={"": 17, ML: 3})
    onnx.save(model, str(tmp_path / "model.onnx"))
    name = model.graph.input[0].name
    labels, probs = ort_run(model.SerializeToString(), {name: x[:4]})

    def write_set(folder, probs):
        folder.mkdir()
        (folder / "input_0.pb").write_bytes(numpy_helper.from_array(x[:4], name).SerializeToString())
        (folder / "output_0.pb").write_bytes(numpy_helper.from_array(labels).SerializeToString())
        maps = [helper.make_map("", TensorProto.INT64, list(p.keys()),
                                helper.make_sequence("", onnx.SequenceProto.TENSOR,
                                                     [numpy_helper.from_array(np.array(v, np.float32))
                                                      for v in p.values()]))
                for p in probs]
        seq = helper.make_sequence("", onnx.SequenceProto.MAP, maps)
        (folder / "output_1.pb").write_bytes(seq.SerializeToString())

    write_set(tmp_path / "test_data_set_0", probs)
    bad = [dict(p) for p in probs]
    bad[2][1] += 0.25
    write_set(tmp_path / "test_data_set_1", bad)
    bin_dir = os.environ.get("ONYX_BIN_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "..", "build", "tools"))
    run = os.path.join(bin_dir, "onnx-run")
    r = subprocess.run([run, str(tmp_path / "model.onnx"), "--test-data", str(tmp_path / "test_data_set_0")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "outputs match" in r.stdout
    r = subprocess.run([run, str(tmp_path / "model.onnx"), "--test-data", str(tmp_path / "test_data_set_1")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "map values" in r.stderr, r.stderr


# ---- encoders, vectorizers, SVMs ----

def fit_and_convert(est, x, y):
    """Fits est (y None: unsupervised) on float32 x and converts it with
    skl2onnx, classifiers without ZipMap; returns (model, float32 x)."""
    from skl2onnx import to_onnx

    x = x.astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(x) if y is None else est.fit(x, y)
        opts = {id(est): {"zipmap": False}} if hasattr(est, "predict_proba") else None
        return to_onnx(est, x[:1], target_opset={"": 17, ML: 3}, options=opts), x


def svm_models():
    from sklearn.datasets import make_classification, make_regression
    from sklearn.svm import SVC, SVR, LinearSVC, LinearSVR, OneClassSVM

    x3, y3 = make_classification(200, 5, n_informative=4, n_redundant=0, n_classes=3, random_state=0)
    x2, y2 = make_classification(200, 5, random_state=1)
    xr, yr = make_regression(200, 5, random_state=0)
    return {
        "svc_rbf": (SVC(), x3, y3),
        "svc_rbf_binary": (SVC(), x2, y2),
        "svc_poly_proba": (SVC(kernel="poly", degree=2, probability=True, random_state=0), x3, y3),
        "svc_sigmoid_binary_proba": (SVC(kernel="sigmoid", probability=True, random_state=0), x2, y2),
        "svc_linear_strings": (SVC(kernel="linear"), x3, np.array(["a", "b", "c"])[y3]),
        "linear_svc": (LinearSVC(), x3, y3),
        "svr_rbf": (SVR(), xr, yr / 100),
        "svr_poly": (SVR(kernel="poly", degree=3), xr, yr / 100),
        "linear_svr": (LinearSVR(), xr, yr / 100),
        "one_class_svm": (OneClassSVM(gamma=0.1), xr, None),
    }


@pytest.mark.parametrize("name", sorted(svm_models()))
def test_svm_models_match_onnxruntime(name):
    est, x, y = svm_models()[name]
    model, x = fit_and_convert(est, x, y)
    ops = {n.op_type for n in model.graph.node}
    assert ops & {"SVMClassifier", "SVMRegressor", "LinearClassifier", "LinearRegressor"}, ops
    check_same(model, {model.graph.input[0].name: x[:40]}, rtol=1e-4, atol=1e-5)


def test_imputer_category_mapper_one_hot_and_feature_vectorizer():
    x = rows()
    x[2, 1] = np.nan
    x[5, 3] = 0.0
    for replaced in (float("nan"), 0.0):
        node = helper.make_node("Imputer", ["x"], ["y"], domain=ML, imputed_value_floats=[9.0, 8.0, 7.0, 6.0],
                                replaced_value_float=replaced)
        check_same(ml_model(node, [fx()], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]), {"x": x})
    xi = np.array([[1, -1, 3], [-1, 5, -1]], np.int64)
    node = helper.make_node("Imputer", ["x"], ["y"], domain=ML, imputed_value_int64s=[42], replaced_value_int64=-1)
    check_same(ml_model(node, [helper.make_tensor_value_info("x", TensorProto.INT64, [None, 3])],
                        [helper.make_tensor_value_info("y", TensorProto.INT64, None)]), {"x": xi})

    cats = dict(cats_strings=["cat", "dog", "eel"], cats_int64s=[3, 5, 8])
    node = helper.make_node("CategoryMapper", ["x"], ["y"], domain=ML, default_int64=-7, **cats)
    check_same(ml_model(node, [helper.make_tensor_value_info("x", TensorProto.STRING, [None])],
                        [helper.make_tensor_value_info("y", TensorProto.INT64, None)]),
               {"x": np.array(["dog", "cow", "eel", "cat"])})
    node = helper.make_node("CategoryMapper", ["x"], ["y"], domain=ML, default_string="?", **cats)
    check_same(ml_model(node, [helper.make_tensor_value_info("x", TensorProto.INT64, [None])],
                        [helper.make_tensor_value_info("y", TensorProto.STRING, None)]),
               {"x": np.array([5, 4, 3, 8], np.int64)})

    node = helper.make_node("OneHotEncoder", ["x"], ["y"], domain=ML, cats_int64s=[1, 4, 7], zeros=1)
    for dtype, tp in ((np.int64, TensorProto.INT64), (np.float32, TensorProto.FLOAT), (np.float64, TensorProto.DOUBLE)):
        check_same(ml_model(node, [helper.make_tensor_value_info("x", tp, [None, 2])],
                            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]),
                   {"x": np.array([[1, 7], [4, 2], [7.5, 1]]).astype(dtype)})
    node = helper.make_node("OneHotEncoder", ["x"], ["y"], domain=ML, cats_strings=["a", "b"], zeros=1)
    check_same(ml_model(node, [helper.make_tensor_value_info("x", TensorProto.STRING, [None, 1])],
                        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]),
               {"x": np.array([["b"], ["z"], ["a"]])})
    node = helper.make_node("OneHotEncoder", ["x"], ["y"], domain=ML, cats_strings=["a", "b"], zeros=0)
    m = ml_model(node, [helper.make_tensor_value_info("x", TensorProto.STRING, [None, 1])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    with pytest.raises(onyx.OnyxError, match="not one of the categories"):
        onyx.InferenceSession(m.SerializeToString()).run(None, {"x": np.array([["z"]])})

    node = helper.make_node("FeatureVectorizer", ["a", "b"], ["y"], domain=ML, inputdimensions=[2, 3])
    for tp, dtype in ((TensorProto.FLOAT, np.float32), (TensorProto.INT64, np.int64)):
        check_same(ml_model(node, [helper.make_tensor_value_info("a", tp, [None, 3]),
                                   helper.make_tensor_value_info("b", tp, [None, 2])],
                            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]),
                   {"a": (rows(3, 4) * 10).astype(dtype), "b": np.arange(8).reshape(4, 2).astype(dtype)})


def map_input(name, key, value):
    t = onnx.TypeProto()
    t.map_type.key_type = key
    t.map_type.value_type.tensor_type.elem_type = value
    return helper.make_value_info(name, t)


def test_dict_vectorizer_and_cast_map_take_dicts():
    node = helper.make_node("DictVectorizer", ["m"], ["y"], domain=ML, string_vocabulary=["a", "b", "c", "d"])
    m = ml_model(node, [map_input("m", TensorProto.STRING, TensorProto.FLOAT)],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    got = check_same(m, {"m": {"c": 3.5, "a": 1.0, "zz": 9.0}})
    np.testing.assert_array_equal(got[0], [[1.0, 0, 3.5, 0]])
    node = helper.make_node("DictVectorizer", ["m"], ["y"], domain=ML, int64_vocabulary=[10, 20, 30])
    m = ml_model(node, [map_input("m", TensorProto.INT64, TensorProto.FLOAT)],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    check_same(m, {"m": {30: 2.0, 10: -1.0}})
    for form, extra in (("DENSE", {}), ("SPARSE", {"max_map": 6})):
        for to, tp in (("TO_FLOAT", TensorProto.FLOAT), ("TO_INT64", TensorProto.INT64)):
            node = helper.make_node("CastMap", ["m"], ["y"], domain=ML, cast_to=to, map_form=form, **extra)
            m = ml_model(node, [map_input("m", TensorProto.INT64, TensorProto.FLOAT)],
                         [helper.make_tensor_value_info("y", tp, None)])
            check_same(m, {"m": {4: 2.5, 1: -1.0, 2: 7.0}})


# ---- more of what users convert: library predictions and onnxruntime ----

def library_models():
    from sklearn.cluster import KMeans
    from sklearn.datasets import make_classification, make_regression
    from sklearn.ensemble import ExtraTreesClassifier, ExtraTreesRegressor
    from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor

    x3, y3 = make_classification(300, 6, n_informative=4, n_classes=3, random_state=0)
    xr, yr = make_regression(300, 6, random_state=0)
    return {
        "extra_trees": (ExtraTreesClassifier(10, max_depth=6, random_state=0), x3, y3),
        "extra_trees_regressor": (ExtraTreesRegressor(10, max_depth=6, random_state=0), xr, yr),
        # HistGradientBoosting* (with missing values) are in sklearn_models, converted with
        # bools_as_ints.
        "knn": (KNeighborsClassifier(5), x3, y3),
        "knn_regressor": (KNeighborsRegressor(5), xr, yr),
        "kmeans": (KMeans(4, n_init=3, random_state=0), x3, None),
    }


@pytest.mark.parametrize("name", sorted(library_models()))
def test_converted_models_match_the_library_and_onnxruntime(name, tmp_path):
    est, x, y = library_models()[name]
    model, x = fit_and_convert(est, x, y)
    got = check_same(model, {model.graph.input[0].name: x[:50]}, rtol=1e-4, atol=1e-4)
    check_cli(model, {model.graph.input[0].name: x[:50]}, got, tmp_path)
    pred = est.predict(x[:50])
    if hasattr(est, "predict_proba"):
        assert got[0].tolist() == pred.tolist()
        np.testing.assert_allclose(got[1], est.predict_proba(x[:50]), rtol=1e-4, atol=1e-5)
    elif y is None:
        assert got[0].ravel().tolist() == pred.tolist()  # KMeans labels
    else:
        np.testing.assert_allclose(got[0].ravel(), pred, rtol=1e-4, atol=1e-3 * np.abs(pred).max())


def test_pipeline_with_imputer_and_one_hot_on_strings():
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import StringTensorType

    rng = np.random.default_rng(0)
    num = rng.normal(size=(200, 3)).astype(np.float32)
    num[::7, 1] = np.nan
    y = (np.nan_to_num(num[:, 1]) + num[:, 0] > 0).astype(np.int64)
    pipe = make_pipeline(SimpleImputer(), StandardScaler(), LogisticRegression())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pipe.fit(num, y)
        model = to_onnx(pipe, num[:1], target_opset={"": 17, ML: 3}, options={id(pipe): {"zipmap": False}})
    assert {"Imputer", "Scaler", "LinearClassifier"} <= {n.op_type for n in model.graph.node}
    got = check_same(model, {model.graph.input[0].name: num[:40]}, rtol=1e-4, atol=1e-5)
    assert got[0].tolist() == pipe.predict(num[:40]).tolist()
    np.testing.assert_allclose(got[1], pipe.predict_proba(num[:40]), rtol=1e-4, atol=1e-5)

    colours = rng.choice(["red", "green", "blue", "grey"], size=(30, 2))
    enc = OneHotEncoder(handle_unknown="ignore").fit(colours[:20])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = to_onnx(enc, initial_types=[("x", StringTensorType([None, 2]))], target_opset={"": 17, ML: 3})
    assert "OneHotEncoder" in {n.op_type for n in model.graph.node}
    got = check_same(model, {"x": colours})
    np.testing.assert_allclose(got[0], enc.transform(colours).toarray(), rtol=0, atol=0)


def test_xgboost_models_match_the_library_and_onnxruntime(tmp_path):
    xgboost = pytest.importorskip("xgboost")  # installed by the test command (xgboost-cpu): never skipped in CI
    import onnxmltools
    from onnxmltools.convert.common.data_types import FloatTensorType
    from sklearn.datasets import make_classification, make_regression

    x3, y3 = make_classification(300, 6, n_informative=4, n_classes=3, random_state=0)
    x2, y2 = make_classification(300, 6, random_state=1)
    xr, yr = make_regression(300, 6, random_state=0)
    for est, x, y in ((xgboost.XGBClassifier(n_estimators=8, max_depth=4), x3, y3),
                      (xgboost.XGBClassifier(n_estimators=8, max_depth=4), x2, y2),
                      (xgboost.XGBRegressor(n_estimators=8, max_depth=4), xr, yr)):
        x = x.astype(np.float32)
        est.fit(x, y)
        model = onnxmltools.convert_xgboost(est, initial_types=[("input", FloatTensorType([None, 6]))],
                                            target_opset=15)
        got = check_same(model, {"input": x[:50]}, rtol=1e-4, atol=1e-4)
        check_cli(model, {"input": x[:50]}, got, tmp_path)
        if hasattr(est, "predict_proba"):
            assert got[0].tolist() == est.predict(x[:50]).tolist()
            probs = got[1] if not isinstance(got[1], list) else np.array([list(m.values()) for m in got[1]])
            np.testing.assert_allclose(probs, est.predict_proba(x[:50]), rtol=1e-4, atol=1e-5)
        else:
            np.testing.assert_allclose(got[0].ravel(), est.predict(x[:50]), rtol=1e-4, atol=1e-3)


def test_bad_map_inputs_are_one_line_errors():
    node = helper.make_node("DictVectorizer", ["m"], ["y"], domain=ML, string_vocabulary=["a", "b"])
    m = ml_model(node, [map_input("m", TensorProto.STRING, TensorProto.FLOAT)],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]).SerializeToString()
    sess = onyx.InferenceSession(m)
    with pytest.raises(onyx.OnyxError, match="map keys must all be str") as e:
        sess.run(None, {"m": {"a": 1.0, 2: 3.0}})
    assert "\n" not in str(e.value)
    with pytest.raises(onyx.OnyxError, match="map keys must all be str"):
        sess.run(None, {"m": {1: 1.0}})
    node = helper.make_node("DictVectorizer", ["m"], ["y"], domain=ML, int64_vocabulary=[1, 2])
    m = ml_model(node, [map_input("m", TensorProto.INT64, TensorProto.FLOAT)],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]).SerializeToString()
    with pytest.raises(onyx.OnyxError, match="map keys must all be int"):
        onyx.InferenceSession(m).run(None, {"m": {"x": 1.0}})
    # a class label count that contradicts the weights
    attrs = tree_attrs("class", [[(2, 1.0)]], np.random.default_rng(0))
    node = helper.make_node("TreeEnsembleClassifier", ["x"], ["label", "scores"], domain=ML,
                            classlabels_int64s=[0, 1], **attrs)
    m = ml_model(node, [fx()], [helper.make_tensor_value_info("label", TensorProto.INT64, None),
                                helper.make_tensor_value_info("scores", TensorProto.FLOAT, None)])
    with pytest.raises(onyx.OnyxError, match="class 2; there are 2"):
        onyx.InferenceSession(m.SerializeToString()).run(None, {"x": rows()})


def test_npy_headers_claiming_more_than_the_data_are_one_line_errors(tmp_path):
    import os
    import subprocess

    bin_dir = os.environ.get("ONYX_BIN_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "..", "build", "tools"))
    model = os.path.join(os.path.dirname(__file__), "..", "..", "..", "models", "onnx", "tiny_mlp", "model.onnx")
    for descr, shape in (("<f4", "(1099511627776, 1099511627776)"), ("<U5", "(4611686018427387904,)"), ("<f4", "(3, 4)")):
        header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
        header += " " * (63 - (10 + len(header)) % 64) + "\n"
        data = b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + b"\0" * 16
        (tmp_path / "x.npy").write_bytes(data)
        r = subprocess.run([os.path.join(bin_dir, "onnx-run"), model, "--input", f"x={tmp_path / 'x.npy'}"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 1, r.stderr
        assert "x.npy: .npy data has 16 bytes but shape" in r.stderr and r.stderr.count("\n") == 1, r.stderr
