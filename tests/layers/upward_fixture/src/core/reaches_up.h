// A core header that reaches up into the graph layer: check_layers.py must reject it.
#pragma once
#include <onyx/graph/expression_graph.h>
