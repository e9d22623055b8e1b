"""The seed walkthrough (shared/seeds/expression-graphs.md, Example 1 and
its gradients) through the Python graph API, printing the seed's values."""
import math

import numpy as np

import onyx


def test_example_1_prints_the_seeds_z(capsys):
    graph = onyx.Graph(device="cpu", workspace_mb=8)
    x = graph.constant([1, 1], onyx.inits.from_value(2))
    y = graph.constant([1, 1], onyx.inits.from_value(3))
    mul_op = x * y
    sin_op = onyx.sin(x)
    z = mul_op + sin_op
    dot = graph.graphviz()
    assert dot.startswith("digraph") and "sin" in dot and "mul" in dot
    graph.forward()
    w = z.value()
    print("z=%g" % w[0, 0])
    assert capsys.readouterr().out == "z=6.9093\n"  # the seed: "The output is: z=6.9093"
    assert w.shape == (1, 1) and w.dtype == np.float32


def test_example_1_gradients_with_params():
    graph = onyx.Graph()
    x = graph.param("x", [1, 1], onyx.inits.from_value(2))
    y = graph.param("y", [1, 1], onyx.inits.from_value(3))
    z = x * y + onyx.sin(x)
    graph.forward()
    graph.backward(z)
    # dz/dx = y + cos(x), dz/dy = x
    assert abs(x.grad()[0, 0] - (3 + math.cos(2))) < 1e-6
    assert abs(y.grad()[0, 0] - 2) < 1e-6
    assert set(graph.params) == {"x", "y"}


def test_seed_node_types_and_affine():
    graph = onyx.Graph(device="cpu", workspace_mb=128)
    n, features = 4, 3
    x = graph.constant([n, features], onyx.inits.from_vector([0.5] * (n * features)))
    w1 = graph.param("W1", [features, 5], onyx.inits.uniform(-0.1, 0.1))
    b1 = graph.param("b1", [1, 5], onyx.inits.zeros())
    h = onyx.tanh(onyx.affine(x, w1, b1))
    ones = graph.ones([10, 10])
    graph.forward()
    assert h.shape == [4, 5] and ones.shape == [10, 10]
    want = np.tanh(np.full((4, 3), 0.5, np.float32) @ w1.value() + b1.value())
    np.testing.assert_allclose(h.value(), want, rtol=1e-6, atol=1e-7)
    assert w1.trainable and not x.trainable
