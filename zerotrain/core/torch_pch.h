// The precompiled header for translation units that use LibTorch (cmake/ZerotrainPch.cmake).
// Only headers every such unit needs belong here: adding one rebuilds them all.
#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <torch/version.h>
