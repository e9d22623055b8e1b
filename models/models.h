// Model builders written with the graph API (see mlp.h, ...).
#pragma once
