"""Onyx: ONNX models and expression graphs, run and trained on CPU or GPU.

    import onyx
    sess = onyx.InferenceSession("model.onnx", threads=2)
    (logits,) = sess.run(None, {"x": x})          # onnxruntime's shape

    trainer = onyx.Trainer("model.onnx", inputs={"x": "x"}, target="y", output="logits", loss="ce", lr=0.02)
    loss = trainer.step({"x": xb, "y": yb})       # one optimizer step
    trainer.export("tuned.onnx")

    g = onyx.Graph()                              # the graph API (the seed's)
    x = g.constant([1, 1], onyx.inits.from_value(2))
    z = x * x + onyx.sin(x)
    g.forward(); z.value()

The user's page is docs/python.md. Arrays cross without copies where the
layout allows (see InferenceSession.run); errors raise onyx.OnyxError with
Onyx's one-line message.
"""
import warnings as _warnings

import numpy as _np

from . import _onyx
from ._onyx import Expr, Model, OnyxError, OnyxInternalError, inits, set_num_threads
from ._ops import *  # noqa: F401,F403  (every registry op by its friendly name)
from ._ops import __all__ as _op_names

__version__ = _onyx.version()

__all__ = [
    "InferenceSession",
    "NodeArg",
    "ModelMetadata",
    "Trainer",
    "Graph",
    "Optimizer",
    "Expr",
    "Model",
    "OnyxError",
    "OnyxInternalError",
    "inits",
    "set_num_threads",
    "ops",
] + list(_op_names)

# onnxruntime's element type names ("tensor(float)") for Onyx's.
_ORT_TYPE = {
    "float32": "float",
    "float64": "double",
    "float16": "float16",
    "bfloat16": "bfloat16",
    "boolean": "bool",
    "string": "string",
}


def ops():
    """The registry's ops: a list of dicts (name, doc, family, min_inputs,
    max_inputs, attrs, onnx, differentiable)."""
    return _onyx.op_specs()


class NodeArg:
    """A model input or output as onnxruntime describes it: name, shape
    (ints, symbolic dims as strings, None where unknown) and type
    ("tensor(float)", "seq(tensor(int64))", "optional(tensor(float))",
    "seq(map(int64,tensor(float)))")."""

    def __init__(self, info):
        self.name = info["name"]
        self.shape = info["shape"] if info["shape"] is not None else []
        elem = "tensor(%s)" % _ORT_TYPE.get(info["type"], info["type"])
        kind = info["kind"]
        if kind in ("map", "sequence_of_maps"):
            elem = "map(%s,%s)" % (_ORT_TYPE.get(info["key_type"], info["key_type"]), elem)
            self.type = elem if kind == "map" else "seq(%s)" % elem
        elif kind == "tensor":
            self.type = elem
        else:
            self.type = ("seq(%s)" if kind == "sequence" else "optional(%s)") % elem
        self.kind = kind
        self.onyx_type = info["describe"]

    def __repr__(self):
        return "NodeArg(name=%r, type=%r, shape=%r)" % (self.name, self.type, self.shape)


class ModelMetadata:
    """What the model file says about itself (onnxruntime's ModelMetadata)."""

    def __init__(self, meta):
        self.producer_name = meta["producer_name"]
        self.producer_version = meta["producer_version"]
        self.domain = meta["domain"]
        self.description = meta["description"]
        self.version = meta["version"]
        self.graph_name = meta["graph_name"]
        self.graph_description = meta["graph_description"]
        self.custom_metadata_map = dict(meta["custom_metadata_map"])

    def __repr__(self):
        return "ModelMetadata(producer_name=%r, graph_name=%r, version=%r)" % (
            self.producer_name,
            self.graph_name,
            self.version,
        )


def _array(name, v):
    """An input as the core takes it, copying only when it must: numpy arrays
    that are C-contiguous, aligned and native-endian pass as they are; others
    are copied once into such an array. Objects with __dlpack__ (PyTorch
    tensors) pass as they are (made contiguous first when they are not).
    Strings become ("__strings__", items, shape); scalars and nested lists a
    new array."""
    if isinstance(v, _np.ndarray):
        if v.dtype.kind in "USO":
            return ("__strings__", [str(s) for s in v.ravel().tolist()], list(v.shape))
        if not v.dtype.isnative:
            v = v.astype(v.dtype.newbyteorder("="))
        if not (v.flags.c_contiguous and v.flags.aligned):
            v = _np.ascontiguousarray(v)
        return v
    if hasattr(v, "__dlpack__") and not isinstance(v, (list, tuple)):
        if hasattr(v, "is_contiguous") and not v.is_contiguous():
            v = v.contiguous()
        return v
    return _array(name, _np.asarray(v))


def _providers_device(providers):
    if not providers:
        return None
    for p in providers:
        name = p[0] if isinstance(p, (tuple, list)) else p
        if name == "CUDAExecutionProvider":
            return "gpu0"
        if name == "CPUExecutionProvider":
            return "cpu"
    raise OnyxError("providers %r: Onyx runs on CPUExecutionProvider or CUDAExecutionProvider" % (providers,))


class InferenceSession:
    """Runs an ONNX model (onnxruntime's InferenceSession, in Onyx).

    InferenceSession(path_or_bytes, threads=0, device="cpu", optimization="all",
                     disabled_passes=(), profile=False, providers=None,
                     max_cached_graphs=64, max_memory_bytes=0, max_loop_iterations=2**20)

    - path_or_bytes: a file path, or the serialized model (bytes).
    - threads: the CPU threads (0: OpenMP's default).
    - device: "cpu" or "gpu0" (also "cuda:0"); providers=["CUDAExecutionProvider"]
      means the same as device="gpu0".
    - optimization: the graph passes, "none", "basic" or "all".
    - profile: time every node; profile_report() prints the table.
    - max_cached_graphs: graphs kept for reuse (one per input-shape signature
      and concurrent run), least recently used dropped first; clear_cache()
      drops them all.
    - max_memory_bytes: the most one run's values may take (0: no limit);
      more raises OnyxError instead of the process being killed.
    - max_loop_iterations: the most iterations one Loop (or steps one Scan)
      may unroll while the graph is built; more raises OnyxError.

    One session may be run from several threads at once (the GIL is
    released; each run owns a graph of its own), with the results of
    single-threaded runs.
    """

    def __init__(self, path_or_bytes, threads=0, device="cpu", optimization="all", disabled_passes=(),
                 profile=False, providers=None, sess_options=None, max_cached_graphs=64, max_memory_bytes=0,
                 max_loop_iterations=2**20):
        del sess_options  # onnxruntime's; Onyx takes its options as arguments
        pd = _providers_device(providers)
        if pd is not None:
            device = pd
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            self._model = Model.from_bytes(bytes(path_or_bytes))
        else:
            self._model = Model.load(str(path_or_bytes))
        for w in self._model.warnings:
            _warnings.warn(w, stacklevel=2)
        self._device = device
        self._sess = _onyx.Session(self._model, threads=threads, device=device, optimization=optimization,
                                   disabled_passes=list(disabled_passes), profile=profile,
                                   max_cached_graphs=max_cached_graphs, max_memory_bytes=max_memory_bytes,
                                   max_loop_iterations=max_loop_iterations)
        self._inputs = [NodeArg(i) for i in self._model.inputs]
        self._outputs = [NodeArg(o) for o in self._model.outputs]
        self._kinds = {i.name: i.kind for i in self._inputs}

    def get_inputs(self):
        """The model's inputs (initializers left out), as NodeArg."""
        return list(self._inputs)

    def get_outputs(self):
        """The model's outputs, as NodeArg."""
        return list(self._outputs)

    def get_modelmeta(self):
        """Producer, version, doc string and metadata_props (ModelMetadata)."""
        return ModelMetadata(self._model.meta())

    def get_providers(self):
        return ["CUDAExecutionProvider"] if self._device.startswith(("gpu", "cuda")) else ["CPUExecutionProvider"]

    def _feeds(self, input_feed):
        feeds = {}
        for name, v in input_feed.items():
            if self._kinds.get(name) == "sequence" and isinstance(v, (list, tuple)):
                feeds[name] = [_array(name, e) for e in v]
            elif v is None or isinstance(v, dict):
                feeds[name] = v
            else:
                feeds[name] = _array(name, v)
        return feeds

    def run(self, output_names, input_feed, run_options=None):
        """Runs the model: output_names (None: all outputs, in the model's
        order) -> a list of values in that order.

        input_feed maps input names to numpy arrays (or PyTorch tensors, or
        anything with __dlpack__, on the CPU), lists of arrays for sequence
        inputs, None for absent optionals. No copy is made of an array that
        is C-contiguous, aligned, native-endian and of the type the model
        declares: Onyx reads the caller's memory (leave it unchanged until
        run returns). Other arrays are copied once; a type other than the
        declared one is an error (as in onnxruntime).

        Tensor outputs are numpy arrays over Onyx's buffers (no copy; each
        array owns its buffer); sequences are lists of arrays, absent
        optionals None, maps dicts and sequences of maps (ZipMap's) lists
        of dicts, as onnxruntime gives them. A map input is a dict. Arrays support __dlpack__ (torch.from_dlpack).
        Raises onyx.OnyxError with a one-line message on bad input.
        """
        del run_options
        out = self._sess.run(list(output_names) if output_names else None, self._feeds(input_feed))
        names = list(output_names) if output_names else [o.name for o in self._outputs]
        return [out[n] for n in names]

    def run_dict(self, input_feed, output_names=None):
        """run() with the outputs as a dict by name."""
        return self._sess.run(list(output_names) if output_names else None, self._feeds(input_feed))

    @property
    def graphs_built(self):
        """Graphs built so far (one per input-shape signature, plus rebuilds)."""
        return self._sess.graphs_built

    @property
    def graphs_cached(self):
        """Graphs the cache holds now (at most max_cached_graphs)."""
        return self._sess.graphs_cached

    def clear_cache(self):
        """Drops every cached graph (runs in progress keep theirs)."""
        self._sess.clear_cache()

    def profile_report(self):
        """The profiler's table (a session made with profile=True)."""
        return self._sess.profile_report()


def _batch(batch):
    return {k: _array(k, v) for k, v in batch.items()}


class Trainer:
    """Fine-tunes an ONNX model (the C++ Trainer; onnx-train's options).

    Trainer(model_path, inputs=None, target="y", output="", loss="ce",
            optimizer="adam", lr=1e-3, momentum=0, weight_decay=0, clip_norm=0,
            warmup=0, decay="constant", min_lr=0, total_steps=0, epochs=1,
            batch_size=32, accumulate=1, shuffle=True, seed=1, freeze=(),
            device="cpu", precision="float32", threads=0, checkpoint_dir="",
            checkpoint_every=100, resume=False)

    inputs maps model inputs to batch array names (None: each input from the
    array of its own name). A batch is a dict of arrays (numpy or PyTorch),
    samples along axis 0: the model inputs and the target. Loop with step(),
    or hand fit() whole arrays (batches, shuffling, validation, checkpoints).
    params() and gradients() are numpy arrays over the Trainer's own buffers
    (the next step changes them: copy what you keep).
    """

    def __init__(self, model_path, **options):
        opts = dict(options)
        if opts.get("inputs") is None:
            opts.pop("inputs", None)
        if "freeze" in opts:
            opts["freeze"] = list(opts["freeze"])
        self._t = _onyx.Trainer(str(model_path), opts)

    def step(self, batch):
        """One optimizer step on a batch (dict of arrays); returns its mean loss."""
        return self._t.step(_batch(batch))

    def step_accumulated(self, micro_batches):
        """One optimizer step over several micro-batches (gradients accumulated)."""
        return self._t.step_accumulated([_batch(b) for b in micro_batches])

    def compute_gradients(self, batch):
        """Forward and backward without an update; returns the loss (then read gradients())."""
        return self._t.compute_gradients(_batch(batch))

    def evaluate(self, batches):
        """Loss (and accuracy for "ce") over a batch or a list of batches, in
        inference mode: {"loss", "accuracy", "samples"}."""
        if isinstance(batches, dict):
            batches = [batches]
        return self._t.evaluate([_batch(b) for b in batches])

    def fit(self, train, valid=None):
        """The epoch loop of onnx-train over whole arrays (dicts of arrays):
        returns one dict per epoch (epoch, train_loss, seconds, valid)."""
        return self._t.fit(_batch(train), _batch(valid) if valid is not None else None)

    def set_data(self, train, valid=None):
        """The data fit() trains and validates on (dicts of whole arrays);
        a new Trainer also needs it (or a step) before load_checkpoint()."""
        self._t.set_data(_batch(train), _batch(valid) if valid is not None else None)

    def params(self):
        """Every param by name (numpy views of the Trainer's buffers)."""
        return self._t.params()

    def gradients(self):
        """The trainable params' gradients of the last backward pass (views)."""
        return self._t.gradients()

    @property
    def steps(self):
        return self._t.steps

    @property
    def learning_rate(self):
        """The learning rate of the next step."""
        return self._t.learning_rate

    def save_checkpoint(self, path):
        """Params, optimizer state and position, written atomically (.npz)."""
        self._t.save_checkpoint(str(path))

    def load_checkpoint(self, path):
        """Restores save_checkpoint's file; returns {"step", "epoch"}. A new
        Trainer builds its params from set_data()'s data first (or from a
        step already taken)."""
        return self._t.load_checkpoint(str(path))

    def export(self, path):
        """The trained model as ONNX (inference graph), checked and written
        atomically; returns its opset."""
        return self._t.export(str(path))


class Graph:
    """An expression graph (the seed's ExpressionGraph): rebuilt per batch,
    reverse-mode autodiff, params that survive clear().

        g = onyx.Graph(device="cpu", workspace_mb=128)
        W = g.param("W", [3, 5], onyx.inits.glorot_uniform())
        x = g.constant(np.ones((4, 3), np.float32))
        y = onyx.tanh(onyx.affine(x, W, g.param("b", [1, 5], onyx.inits.zeros())))
        g.forward(); g.backward(onyx.sum(y))

    Ops are the module's functions (onyx.sin, onyx.softmax, ...: every
    registry op by its friendly name) and Python's operators + - * / on
    expressions and numbers.
    """

    def __init__(self, device="cpu", workspace_mb=128, dtype=None, inference=False):
        self._g = _onyx.new_graph(device=device, workspace_mb=workspace_mb, dtype=dtype, inference=inference)

    def constant(self, shape_or_array, init=None, dtype=None):
        """A constant: constant(shape, init, dtype) as in the seed, or
        constant(array) holding a copy of the array."""
        if init is None:
            return _onyx.graph_constant_array(self._g, _array("constant", _np.asarray(shape_or_array)))
        return _onyx.graph_constant(self._g, list(shape_or_array), init, dtype)

    def ones(self, shape, dtype=None):
        return _onyx.graph_constant(self._g, list(shape), inits.ones(), dtype)

    def zeros(self, shape, dtype=None):
        return _onyx.graph_constant(self._g, list(shape), inits.zeros(), dtype)

    def indices(self, values):
        """Integer labels or indices as an int64 vector constant."""
        return _onyx.graph_indices(self._g, [int(v) for v in values])

    def param(self, name, shape, init=None, dtype=None, trainable=True):
        """A named param (asking again for the name returns the same one);
        init: an onyx.inits initializer, an array or a number (default
        glorot_uniform)."""
        if init is None:
            init = inits.glorot_uniform()
        elif isinstance(init, _np.ndarray):
            init = _array(name, init)
        return _onyx.graph_param(self._g, name, list(shape), init, dtype, trainable)

    def input(self, name, shape, dtype=None):
        """An input node, bound with bind(name, array) before each forward()."""
        return _onyx.graph_input(self._g, name, list(shape), dtype)

    def bind(self, name, array):
        _onyx.graph_bind(self._g, name, _array(name, array))

    def get(self, name):
        """The param or input `name`, or None."""
        return _onyx.graph_get(self._g, name)

    def forward(self):
        _onyx.graph_forward(self._g)

    def backward(self, root=None):
        """Reverse-mode autodiff from root (default: the last node built),
        seeded with ones."""
        _onyx.graph_backward(self._g, root)

    def backprop(self):
        self.forward()
        self.backward()

    def clear(self):
        """Drops every node but the params (their expressions stay valid)."""
        _onyx.graph_clear(self._g)

    def graphviz(self):
        return _onyx.graph_graphviz(self._g)

    def save(self, path):
        """The params as .npz (numpy reads it)."""
        _onyx.graph_save(self._g, str(path))

    def load(self, path):
        _onyx.graph_load(self._g, str(path))

    def set_seed(self, seed):
        _onyx.graph_set_seed(self._g, int(seed))

    def set_inference(self, on):
        _onyx.graph_set_inference(self._g, bool(on))

    def set_checkpointing(self, on):
        _onyx.graph_set_checkpointing(self._g, bool(on))

    @property
    def params(self):
        """The params by name, in creation order."""
        return dict(_onyx.graph_params(self._g))

    def __len__(self):
        return _onyx.graph_size(self._g)

    def export_onnx(self, path, outputs, dynamic_axes=None, opset=0):
        """Writes the graph as ONNX: outputs maps output names to expressions;
        dynamic_axes ({input: {axis: name}}) keeps input axes symbolic.
        Checked with ONNX's checker and written atomically; returns the opset."""
        if not isinstance(outputs, dict):
            raise OnyxError("export_onnx: outputs must map output names to onyx.Expr")
        dims = {}
        for name, axes in (dynamic_axes or {}).items():
            node = self.get(name)
            if node is None:
                raise OnyxError("export_onnx: dynamic_axes names '%s', which is not an input of the graph" % name)
            names = [""] * len(node.shape)
            for axis, dim in axes.items():
                names[int(axis)] = str(dim)
            dims[name] = names
        return _onyx.graph_export_onnx(self._g, str(path), list(outputs.items()), dims, opset)


class Optimizer:
    """Sgd, Adagrad, Adam or AdamW over a graph's trainable params (one fused
    pass): Optimizer("adam", lr=0.01).update(graph) after graph.backward()."""

    def __init__(self, name, lr, momentum=0.0, weight_decay=0.0, clip_norm=0.0, beta1=0.9, beta2=0.999, eps=1e-8):
        self._o = _onyx.make_optimizer(name, lr, momentum, weight_decay, clip_norm, beta1, beta2, eps)

    def update(self, graph):
        """One step; returns the global gradient norm before clipping."""
        return self._o.update(graph._g)

    @property
    def lr(self):
        return self._o.lr

    @lr.setter
    def lr(self, v):
        self._o.lr = v

    @property
    def steps(self):
        return self._o.steps
