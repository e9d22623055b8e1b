"""onyx.InferenceSession against onnxruntime on the real architectures of
models/onnx/make_models.py, zero-copy in and out, DLPack, model metadata,
bad input and concurrent sessions."""
import threading

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import make_models
import onyx

# As tests/python/test_vs_onnxruntime.py (measured worst: 5e-6 absolute).
RTOL = 1e-5
ATOL = 1e-5


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    return make_models.write_all(str(d))


def ort_run(path, feeds):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds), [o.name for o in sess.get_outputs()]


@pytest.mark.parametrize("name", sorted(make_models.BUILDERS))
def test_real_architectures_match_onnxruntime(models, name):
    sess = onyx.InferenceSession(models[name], threads=2)
    for batch in (1, 3):
        feeds = make_models.make_inputs(name, batch, seed=batch)
        want, names = ort_run(models[name], feeds)
        got = sess.run(None, feeds)
        assert [o.name for o in sess.get_outputs()] == names
        assert len(got) == len(want)
        for g, w, n in zip(got, want, names):
            assert isinstance(g, np.ndarray)
            assert g.dtype == w.dtype and g.shape == w.shape, n
            np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL, err_msg=n)
    assert sess.graphs_built == 2  # one graph per input shape
    # run_dict and named outputs
    d = sess.run_dict(feeds, [names[0]])
    assert list(d) == [names[0]]


def test_inputs_outputs_and_metadata(models, tmp_path):
    m = onnx.load(models["mlp"])
    m.producer_name = "maker"
    m.producer_version = "7.1"
    m.doc_string = "an MLP"
    m.model_version = 12
    m.domain = "ai.example"
    m.graph.doc_string = "the graph"
    helper.set_model_props(m, {"author": "me", "licence": "MIT"})
    path = tmp_path / "mlp_meta.onnx"
    onnx.save(m, str(path))
    for src in (str(path), path.read_bytes()):
        sess = onyx.InferenceSession(src)
        meta = sess.get_modelmeta()
        ref = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).get_modelmeta()
        for field in ("producer_name", "graph_name", "domain", "description", "graph_description", "version",
                      "custom_metadata_map"):
            assert getattr(meta, field) == getattr(ref, field), field
        ins = sess.get_inputs()
        ref_ins = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).get_inputs()
        assert [(i.name, i.type, i.shape) for i in ins] == [(i.name, i.type, i.shape) for i in ref_ins]
        assert ins[0].shape[0] == "N"  # symbolic dims are strings


def test_zero_copy_in_and_out(models):
    sess = onyx.InferenceSession(models["mlp"])
    x = make_models.make_inputs("mlp", 4)["x"]
    assert x.flags.c_contiguous and x.dtype == np.float32
    (y,) = sess.run(None, {"x": x})
    # the input node read the caller's memory
    assert sess._sess._input_address("x") == x.__array_interface__["data"][0]
    # the output owns an Onyx buffer (no numpy copy was made of it)
    assert not y.flags.owndata and y.base is not None
    # an array through a Tensor and back keeps its address both ways
    a = np.arange(12, dtype=np.float64).reshape(3, 4)
    b = onyx._onyx._roundtrip(a)
    assert b.__array_interface__["data"][0] == a.__array_interface__["data"][0]
    np.testing.assert_array_equal(a, b)
    # a strided view is copied once (documented), and gives the same result
    big = np.ascontiguousarray(np.repeat(x, 2, axis=1))
    view = big[:, ::2]
    assert not view.flags.c_contiguous
    np.testing.assert_allclose(sess.run(None, {"x": view})[0], y, rtol=0, atol=0)


def test_outputs_outlive_the_session(models):
    sess = onyx.InferenceSession(models["mlp"])
    x = make_models.make_inputs("mlp", 2)["x"]
    first = sess.run(None, {"x": x})[0].copy()
    y = sess.run(None, {"x": x})[0]
    del sess
    import gc

    gc.collect()
    np.testing.assert_array_equal(y, first)


def test_cache_bound_and_memory_limit(models):
    sess = onyx.InferenceSession(models["mlp"], max_cached_graphs=2)
    ys = {b: sess.run(None, make_models.make_inputs("mlp", b))[0] for b in (1, 2, 3, 4)}
    assert sess.graphs_built == 4 and sess.graphs_cached == 2
    sess.run(None, make_models.make_inputs("mlp", 4))  # the most recent: still cached
    assert sess.graphs_built == 4
    np.testing.assert_array_equal(sess.run(None, make_models.make_inputs("mlp", 1))[0], ys[1])  # rebuilt
    assert sess.graphs_built == 5
    sess.clear_cache()
    assert sess.graphs_cached == 0
    small = onyx.InferenceSession(models["mlp"], max_memory_bytes=64 << 10)
    small.run(None, make_models.make_inputs("mlp", 2))
    with pytest.raises(onyx.OnyxError, match="memory limit"):
        small.run(None, make_models.make_inputs("mlp", 4096))
    np.testing.assert_array_equal(small.run(None, make_models.make_inputs("mlp", 2))[0], ys[2])


def test_loop_iterations_are_bounded(tmp_path):
    # Loop(M, v) with a Relu body: Onyx unrolls it while the graph is built,
    # at most max_loop_iterations times.
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["c_out"]), helper.make_node("Relu", ["x"], ["x_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x_out", TensorProto.FLOAT, [2])])
    g = helper.make_graph([helper.make_node("Loop", ["m", "", "v"], ["y"], body=body)], "loop",
                          [helper.make_tensor_value_info("m", TensorProto.INT64, []),
                           helper.make_tensor_value_info("v", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    v = np.array([-1, 2], np.float32)
    sess = onyx.InferenceSession(model.SerializeToString(), max_loop_iterations=5)
    np.testing.assert_array_equal(sess.run(None, {"m": np.array(5), "v": v})[0], [0, 2])
    with pytest.raises(onyx.OnyxError, match="more than 5 iterations"):
        sess.run(None, {"m": np.array(6), "v": v})


def test_dlpack_with_pytorch(models):
    torch = pytest.importorskip("torch")  # the test command installs torch: never skipped in CI
    sess = onyx.InferenceSession(models["mlp"])
    x = make_models.make_inputs("mlp", 3)["x"]
    t = torch.from_numpy(x.copy())
    (y_t,) = sess.run(None, {"x": t})
    assert sess._sess._input_address("x") == t.data_ptr()  # read in place through __dlpack__
    (y_np,) = sess.run(None, {"x": x})
    np.testing.assert_array_equal(y_t, y_np)
    out = torch.from_dlpack(y_np)  # and out again without a copy
    assert out.data_ptr() == y_np.__array_interface__["data"][0]
    # a non-contiguous tensor is made contiguous first
    (y_nc,) = sess.run(None, {"x": torch.from_numpy(np.asfortranarray(x))})
    np.testing.assert_array_equal(y_nc, y_np)


def test_bad_input_raises_with_the_message(models):
    sess = onyx.InferenceSession(models["mlp"])
    x = make_models.make_inputs("mlp", 2)["x"]
    with pytest.raises(onyx.OnyxError, match="float64") as e:
        sess.run(None, {"x": x.astype(np.float64)})
    assert "\n" not in str(e.value)
    with pytest.raises(onyx.OnyxError, match="x"):
        sess.run(None, {})
    with pytest.raises(onyx.OnyxError, match=r"no input 'nope'"):
        sess.run(None, {"x": x, "nope": x})
    with pytest.raises(onyx.OnyxError, match=r"2x7|shape"):
        sess.run(None, {"x": np.zeros((2, 7), np.float32)})
    with pytest.raises(onyx.OnyxError, match=r"no output 'zz'"):
        sess.run(["zz"], {"x": x})
    with pytest.raises(onyx.OnyxError, match="missing.onnx"):
        onyx.InferenceSession("missing.onnx")
    with pytest.raises(onyx.OnyxError, match="model bytes"):
        onyx.InferenceSession(b"not a model")
    with pytest.raises(onyx.OnyxError, match="optimization"):
        onyx.InferenceSession(models["mlp"], optimization="max")


def test_sequences_strings_and_booleans(tmp_path):
    # SequenceConstruct of two inputs, a string Identity and a boolean Not
    g = helper.make_graph(
        [helper.make_node("SequenceConstruct", ["a", "b"], ["seq"]),
         helper.make_node("Identity", ["s"], ["s_out"]),
         helper.make_node("Not", ["flag"], ["not_flag"])],
        "g",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("s", TensorProto.STRING, [2]),
         helper.make_tensor_value_info("flag", TensorProto.BOOL, [2])],
        [helper.make_tensor_sequence_value_info("seq", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("s_out", TensorProto.STRING, [2]),
         helper.make_tensor_value_info("not_flag", TensorProto.BOOL, [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    path = tmp_path / "seq.onnx"
    onnx.save(m, str(path))
    sess = onyx.InferenceSession(str(path))
    feeds = {"a": np.array([1, 2], np.float32), "b": np.array([3, 4, 5], np.float32),
             "s": np.array(["héllo", "x"]), "flag": np.array([True, False])}
    seq, s, nf = sess.run(None, feeds)
    assert isinstance(seq, list) and len(seq) == 2
    np.testing.assert_array_equal(seq[1], [3, 4, 5])
    assert s.tolist() == ["héllo", "x"]
    assert nf.dtype == np.bool_ and nf.tolist() == [False, True]
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
    assert [w.tolist() for w in want[0]] == [v.tolist() for v in seq]


def test_concurrent_sessions_in_threads(models):
    x = {b: make_models.make_inputs("resnet", b, seed=b) for b in (1, 2)}
    want = {b: ort_run(models["resnet"], x[b])[0][0] for b in (1, 2)}
    shared = onyx.InferenceSession(models["resnet"], threads=1)
    errors = []

    def worker(sess, b, n):
        try:
            for _ in range(n):
                (y,) = sess.run(None, x[b])
                np.testing.assert_allclose(y, want[b], rtol=RTOL, atol=ATOL)
        except Exception as e:  # noqa: BLE001  (reported below)
            errors.append(e)

    own = [onyx.InferenceSession(models["resnet"], threads=1) for _ in range(2)]
    threads = [threading.Thread(target=worker, args=(own[i], i + 1, 3)) for i in range(2)]
    threads += [threading.Thread(target=worker, args=(shared, 1 + i % 2, 3)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
