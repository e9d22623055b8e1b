#!/usr/bin/env python3
"""The real-architecture models of tools/bench_vs_ort.py: PyTorch and
torchvision definitions with random weights (a fixed seed), exported with
torch.onnx.export at opset 17, one file per model and batch size (static
shapes, as a deployed model usually is), cached in a folder.

    python3 tools/bench_models.py                        # all, into build/bench_models
    python3 tools/bench_models.py --models resnet50 bert_base --batch 1
    python3 tools/bench_models.py --list

Models (float32, eval mode: BatchNormalization folded into the convolutions
by the exporter, dropout off; the BatchNorm statistics are those of two
random batches, so activations keep a trained network's scale instead of
shrinking to denormal numbers):
  resnet50, resnet18, mobilenet_v2, efficientnet_b0, densenet121,
  squeezenet1_1, shufflenet_v2_x1_0
            torchvision's definitions, input x float32[B,3,224,224]
  bert_base BERT-base encoder written here: token and position embeddings,
            LayerNorm, 12 post-LN layers (hidden 768, 12 heads, FFN 3072,
            exact GELU), the attention mask added to the scores as BERT does
            ((1 - mask) * -10000). Inputs input_ids int64[B,128] in [0, 30522),
            attention_mask int64[B,128] (the last 16 positions masked)
  bilstm    a tagger: embedding (vocab 10000, 128), 2-layer bidirectional LSTM
            (hidden 256), linear to 20 tags. Input tokens int64[B,64]
  unet      a small U-Net: 4 levels of two 3x3 conv+BN+ReLU (32 to 256
            channels), max pooling down; up by 2x2 stride-2 ConvTranspose at
            two levels and by bilinear Resize (+1x1 conv) at one, with skip
            concatenations; 1x1 conv to 2 classes. Input x float32[B,3,128,128]
  mlp       784-512-512-10 with ReLU (Gemm). Input x float32[B,784]
Batches: 1 and 8 (the MLP: 64).

The exporter is the TorchScript one (dynamo=False): it gives the graphs most
deployed ONNX files have (Conv with folded BatchNormalization, one ONNX LSTM
node per layer, LayerNormalization and Erf at opset 17), where the newer
torch.export exporter needs opset 18 for some of them and unrolls the LSTM.

FLOPs (count_flops): 2 per multiply-add of Conv, ConvTranspose, Gemm and
MatMul (and LSTM/GRU/RNN as their gate GEMMs: per direction and time step,
2 * batch * gates * hidden * (input + hidden)), from the shapes
onnx.shape_inference infers; element-wise ops, normalisation, softmax,
pooling and resizing are not counted (a few percent on these models). The
count is per run of the exported model, i.e. for the whole batch.

Each model file has a JSON file beside it (inputs, FLOPs, the output's
statistics on the saved inputs) and .npy inputs, so a run of the benchmark
exports nothing that is already there; --force re-exports.
"""
import argparse
import json
import os
import sys
import warnings

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_CACHE = os.path.join(REPO, "build", "bench_models")
OPSET = 17
SEED = 20251116
# Bumped when a definition or the export changes, so stale cached files are re-made.
VERSION = 2

BERT = dict(vocab=30522, seq=128, hidden=768, heads=12, ffn=3072, layers=12, max_pos=512)
LSTM = dict(vocab=10000, emb=128, hidden=256, layers=2, tags=20, seq=64)
UNET_SIZE = 128

TORCHVISION = ["resnet50", "resnet18", "mobilenet_v2", "efficientnet_b0", "densenet121", "squeezenet1_1",
               "shufflenet_v2_x1_0"]
DESCRIPTION = {
    "resnet50": "ResNet-50 (torchvision), 3x224x224",
    "resnet18": "ResNet-18 (torchvision), 3x224x224",
    "mobilenet_v2": "MobileNetV2 (torchvision), 3x224x224",
    "efficientnet_b0": "EfficientNet-B0 (torchvision), 3x224x224",
    "densenet121": "DenseNet-121 (torchvision), 3x224x224",
    "squeezenet1_1": "SqueezeNet 1.1 (torchvision), 3x224x224",
    "shufflenet_v2_x1_0": "ShuffleNetV2 x1.0 (torchvision), 3x224x224",
    "bert_base": "BERT-base encoder (12 layers, 768, 12 heads, FFN 3072), sequence 128, attention mask",
    "bilstm": "BiLSTM tagger (vocab 10000, emb 128, 2x bidirectional LSTM 256, 20 tags), sequence 64",
    "unet": f"small U-Net (ConvTranspose and bilinear Resize), 3x{UNET_SIZE}x{UNET_SIZE}",
    "mlp": "MLP 784-512-512-10",
}
MODELS = TORCHVISION + ["bert_base", "bilstm", "unet", "mlp"]


def default_batches(name):
    return [64] if name == "mlp" else [1, 8]


def torch_module(name):
    """The PyTorch module of `name`, in eval mode, weights from SEED."""
    import torch
    from torch import nn

    torch.manual_seed(SEED)
    if name in TORCHVISION:
        import torchvision

        return getattr(torchvision.models, name)(weights=None).eval()

    if name == "bert_base":
        c = BERT

        class Layer(nn.Module):
            def __init__(self):
                super().__init__()
                h = c["hidden"]
                self.q, self.k, self.v, self.o = (nn.Linear(h, h) for _ in range(4))
                self.ln1, self.ln2 = nn.LayerNorm(h, eps=1e-12), nn.LayerNorm(h, eps=1e-12)
                self.up, self.down = nn.Linear(h, c["ffn"]), nn.Linear(c["ffn"], h)

            def forward(self, x, bias):
                b, s, h = x.shape
                nh, dh = c["heads"], h // c["heads"]

                def heads(t):
                    return t.view(b, s, nh, dh).transpose(1, 2)

                q, k, v = heads(self.q(x)), heads(self.k(x)), heads(self.v(x))
                scores = torch.matmul(q, k.transpose(-1, -2)) / (dh ** 0.5) + bias
                ctx = torch.matmul(torch.softmax(scores, -1), v).transpose(1, 2).reshape(b, s, h)
                x = self.ln1(x + self.o(ctx))
                return self.ln2(x + self.down(nn.functional.gelu(self.up(x))))

        class Bert(nn.Module):
            def __init__(self):
                super().__init__()
                h = c["hidden"]
                self.tok = nn.Embedding(c["vocab"], h)
                self.pos = nn.Embedding(c["max_pos"], h)
                self.ln = nn.LayerNorm(h, eps=1e-12)
                self.layers = nn.ModuleList(Layer() for _ in range(c["layers"]))

            def forward(self, input_ids, attention_mask):
                s = input_ids.shape[1]
                x = self.ln(self.tok(input_ids) + self.pos(torch.arange(s).unsqueeze(0)))
                bias = (1.0 - attention_mask[:, None, None, :].to(torch.float32)) * -10000.0
                for layer in self.layers:
                    x = layer(x, bias)
                return x

        return Bert().eval()

    if name == "bilstm":
        c = LSTM

        class Tagger(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(c["vocab"], c["emb"])
                self.lstm = nn.LSTM(c["emb"], c["hidden"], num_layers=c["layers"], bidirectional=True,
                                    batch_first=True)
                self.out = nn.Linear(2 * c["hidden"], c["tags"])

            def forward(self, tokens):
                return self.out(self.lstm(self.emb(tokens))[0])

        return Tagger().eval()

    if name == "unet":
        def double(cin, cout):
            return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
                                 nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())

        class UNet(nn.Module):
            def __init__(self):
                super().__init__()
                self.e1, self.e2, self.e3, self.e4 = double(3, 32), double(32, 64), double(64, 128), double(128, 256)
                self.pool = nn.MaxPool2d(2)
                self.up3 = nn.ConvTranspose2d(256, 128, 2, stride=2)
                self.d3 = double(256, 128)
                self.up2 = nn.Sequential(nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False),
                                         nn.Conv2d(128, 64, 1))
                self.d2 = double(128, 64)
                self.up1 = nn.ConvTranspose2d(64, 32, 2, stride=2)
                self.d1 = double(64, 32)
                self.head = nn.Conv2d(32, 2, 1)

            def forward(self, x):
                x1 = self.e1(x)
                x2 = self.e2(self.pool(x1))
                x3 = self.e3(self.pool(x2))
                x4 = self.e4(self.pool(x3))
                y = self.d3(torch.cat([self.up3(x4), x3], 1))
                y = self.d2(torch.cat([self.up2(y), x2], 1))
                y = self.d1(torch.cat([self.up1(y), x1], 1))
                return self.head(y)

        return UNet().eval()

    if name == "mlp":
        return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                             nn.Linear(512, 10)).eval()
    raise KeyError(f"unknown model '{name}' (models: {', '.join(MODELS)})")


def calibrate_batch_norm(module, name):
    """Sets every BatchNorm's running statistics to those of its input on a
    random batch, as training would have left them: with the initial ones
    (mean 0, variance 1) activations shrink layer after layer in MobileNetV2
    and EfficientNet-B0 until they are denormal numbers, which slow the CPU
    down and would make the benchmark measure that instead of the model."""
    import torch
    from torch import nn

    bns = [m for m in module.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return module
    for m in bns:
        m.reset_running_stats()
        m.momentum = None  # a plain average over the calibration batches
    module.train()
    with torch.no_grad():
        for i in range(2):
            x = make_inputs(name, 8, seed=SEED + 100 + i)
            module(*(torch.from_numpy(v) for v in x.values()))
    return module.eval()


def make_inputs(name, batch, seed=None):
    """The inputs of `name` at `batch` (numpy, from a seed of their own)."""
    rng = np.random.default_rng(SEED + batch if seed is None else seed)
    if name in TORCHVISION:
        return {"x": rng.standard_normal((batch, 3, 224, 224), dtype=np.float32)}
    if name == "unet":
        return {"x": rng.standard_normal((batch, 3, UNET_SIZE, UNET_SIZE), dtype=np.float32)}
    if name == "mlp":
        return {"x": rng.standard_normal((batch, 784), dtype=np.float32)}
    if name == "bert_base":
        mask = np.ones((batch, BERT["seq"]), np.int64)
        mask[:, -16:] = 0
        return {"input_ids": rng.integers(0, BERT["vocab"], (batch, BERT["seq"]), dtype=np.int64),
                "attention_mask": mask}
    if name == "bilstm":
        return {"tokens": rng.integers(0, LSTM["vocab"], (batch, LSTM["seq"]), dtype=np.int64)}
    raise KeyError(f"unknown model '{name}' (models: {', '.join(MODELS)})")


def export(name, batch, path):
    """Writes `name` at `batch` to `path` (ONNX, opset 17, static shapes)."""
    import torch

    module = calibrate_batch_norm(torch_module(name), name)
    inputs = make_inputs(name, batch)
    args = tuple(torch.from_numpy(v) for v in inputs.values())
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice
        torch.onnx.export(module, args, path + ".tmp", input_names=list(inputs), output_names=["y"],
                          opset_version=OPSET, dynamo=False, do_constant_folding=True)
        out = module(*args).numpy()
    os.replace(path + ".tmp", path)
    return out


def _dims(vi):
    t = vi.type.tensor_type
    if not t.HasField("shape"):
        return None
    d = [x.dim_value if x.HasField("dim_value") else None for x in t.shape.dim]
    return None if any(v is None for v in d) else d


def _shapes_from_onnxruntime(model, names, inputs):
    """Shapes of the values `names` of `model`, from one onnxruntime run on
    `inputs`: for the few values (ShuffleNetV2's channel split) whose shape
    onnx.shape_inference cannot work out."""
    import onnx
    import onnxruntime as ort

    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    for n in names:
        if n not in have:
            m.graph.output.append(onnx.helper.make_empty_tensor_value_info(n))
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # keep every value
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    outs = sess.run(list(names), inputs)
    return {n: list(v.shape) for n, v in zip(names, outs)}


def count_flops(model, inputs=None):
    """FLOPs of one run of `model` (an onnx.ModelProto or a path): 2 per
    multiply-add of Conv, ConvTranspose, Gemm, MatMul, and of the gate GEMMs
    of LSTM, GRU and RNN. Returns (total, {op_type: flops}); an op whose
    shapes could not be inferred raises ValueError (a count that silently
    skipped it would overstate every rate derived from it) unless `inputs`
    ({name: numpy array}) are given: then onnxruntime runs the model once
    for the shapes inference missed."""
    import onnx

    if isinstance(model, str):
        model = onnx.load(model)
    model = onnx.shape_inference.infer_shapes(model, data_prop=True)
    g = model.graph
    shapes = {}
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        d = _dims(vi)
        if d is not None:
            shapes[vi.name] = d
    for t in g.initializer:
        shapes[t.name] = list(t.dims)

    counted = ("Conv", "ConvTranspose", "Gemm", "MatMul", "LSTM", "GRU", "RNN")
    missing = [n for node in g.node if node.op_type in counted for n in (node.input[0], node.input[1], node.output[0])
               if n and n not in shapes]
    if missing and inputs is not None:
        shapes.update(_shapes_from_onnxruntime(model, sorted(set(missing)), inputs))

    def shape(node, i):
        names = node.input if i >= 0 else node.output
        name = names[i if i >= 0 else -i - 1]
        if name not in shapes:
            raise ValueError(f"{node.op_type} node '{node.name}': no inferred shape for '{name}'")
        return shapes[name]

    def attr(node, key, default):
        for a in node.attribute:
            if a.name == key:
                return onnx.helper.get_attribute_value(a)
        return default

    by_op = {}
    for node in g.node:
        op = node.op_type
        if op == "Conv":
            y, w = shape(node, -1), shape(node, 1)  # W [M, C/group, k..]
            flops = 2 * int(np.prod(y)) * int(np.prod(w[1:]))
        elif op == "ConvTranspose":
            x, w = shape(node, 0), shape(node, 1)  # W [C, M/group, k..]: each input element meets W[c]
            flops = 2 * int(np.prod(x)) * int(np.prod(w[1:]))
        elif op == "Gemm":
            a, y = shape(node, 0), shape(node, -1)
            k = a[0] if attr(node, "transA", 0) else a[1]
            flops = 2 * int(np.prod(y)) * k
        elif op == "MatMul":
            a, y = shape(node, 0), shape(node, -1)
            flops = 2 * int(np.prod(y)) * a[-1]
        elif op in ("LSTM", "GRU", "RNN"):
            x = shape(node, 0)
            seq, batch = (x[1], x[0]) if attr(node, "layout", 0) else (x[0], x[1])
            hidden = attr(node, "hidden_size", None)
            dirs = 2 if attr(node, "direction", b"forward") in (b"bidirectional", "bidirectional") else 1
            gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
            flops = 2 * dirs * seq * batch * gates * hidden * (x[2] + hidden)
        else:
            continue
        by_op[op] = by_op.get(op, 0) + flops
    return sum(by_op.values()), by_op


def ensure(name, batch, cache=DEFAULT_CACHE, force=False, log=sys.stderr):
    """The cached model `name` at `batch`, exported if missing or stale:
    returns its metadata (path, inputs as {name: .npy path}, flops, ...)."""
    import onnx

    os.makedirs(cache, exist_ok=True)
    base = os.path.join(cache, f"{name}_b{batch}")
    meta_path = base + ".json"
    if not force and os.path.exists(meta_path) and os.path.exists(base + ".onnx"):
        meta = json.load(open(meta_path))
        if meta.get("version") == VERSION and all(os.path.exists(p) for p in meta["inputs"].values()):
            return meta
    if log:
        print(f"bench_models: exporting {name} batch {batch} to {base}.onnx", file=log)
    inputs = make_inputs(name, batch)
    paths = {}
    for k, v in inputs.items():
        paths[k] = f"{base}_{k}.npy"
        np.save(paths[k], v)
    out = export(name, batch, base + ".onnx")
    model = onnx.load(base + ".onnx")
    onnx.checker.check_model(model)
    total, by_op = count_flops(model, inputs)
    ops = sorted({n.op_type for n in model.graph.node})
    params = sum(int(np.prod(t.dims)) for t in model.graph.initializer)
    meta = {"version": VERSION, "name": name, "batch": batch, "description": DESCRIPTION[name],
            "path": base + ".onnx", "inputs": paths, "flops": total, "flops_by_op": by_op, "params": params,
            "op_types": ops, "output_mean_abs": float(np.mean(np.abs(out))),
            "output_finite": bool(np.isfinite(out).all()), "torch_output": base + "_torch_y.npy"}
    np.save(meta["torch_output"], out)
    with open(meta_path + ".tmp", "w") as f:
        json.dump(meta, f, indent=1)
    os.replace(meta_path + ".tmp", meta_path)
    return meta


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", default=DEFAULT_CACHE, help="folder of the exported models")
    ap.add_argument("--models", nargs="*", default=MODELS, help="model names (default: all)")
    ap.add_argument("--batch", type=int, nargs="*", help="batch sizes (default: 1 and 8; the MLP 64)")
    ap.add_argument("--force", action="store_true", help="export again even when cached")
    ap.add_argument("--list", action="store_true", help="print the models and exit")
    args = ap.parse_args(argv)
    if args.list:
        for m in MODELS:
            print(f"{m:20s} batches {','.join(map(str, default_batches(m)))}: {DESCRIPTION[m]}")
        return 0
    for name in args.models:
        if name not in MODELS:
            sys.exit(f"bench_models: unknown model '{name}' (models: {', '.join(MODELS)})")
        for batch in args.batch or default_batches(name):
            m = ensure(name, batch, args.cache, args.force)
            print(f"{name} batch {batch}: {m['path']}, {m['flops'] / 1e9:.3f} GFLOP, {m['params'] / 1e6:.2f} M params, "
                  f"output mean |y| {m['output_mean_abs']:.3g}{'' if m['output_finite'] else ' (NOT FINITE)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
