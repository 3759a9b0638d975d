# The sources of libzerotrain_core (core, config, the CUDA sighting: no LibTorch), as absolute paths. One list
# for the main build (zerotrain/CMakeLists.txt) and the sanitizer build of the config-reader
# fuzz target (fuzz/CMakeLists.txt), which must not need LibTorch.
set(ZEROTRAIN_CORE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/core/error.cpp
  ${CMAKE_CURRENT_LIST_DIR}/core/env.cpp
  ${CMAKE_CURRENT_LIST_DIR}/core/logging.cpp
  ${CMAKE_CURRENT_LIST_DIR}/core/strings.cpp
  ${CMAKE_CURRENT_LIST_DIR}/core/text_file.cpp
  ${CMAKE_CURRENT_LIST_DIR}/core/json_reader.cpp
  ${CMAKE_CURRENT_LIST_DIR}/core/input_file.cpp
  ${CMAKE_CURRENT_LIST_DIR}/core/escape.cpp
  ${CMAKE_CURRENT_LIST_DIR}/core/host_memory.cpp
  ${CMAKE_CURRENT_LIST_DIR}/core/output_file.cpp
  ${CMAKE_CURRENT_LIST_DIR}/core/output_path.cpp
  ${CMAKE_CURRENT_LIST_DIR}/core/cpu_features.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cuda/availability.cpp   # whether a GPU is shown, and what the CUDA loader did (no CUDA needed)
  ${CMAKE_CURRENT_LIST_DIR}/config/json_text.cpp
  ${CMAKE_CURRENT_LIST_DIR}/config/diagnostics.cpp
  ${CMAKE_CURRENT_LIST_DIR}/config/field.cpp
  ${CMAKE_CURRENT_LIST_DIR}/config/reader.cpp
  ${CMAKE_CURRENT_LIST_DIR}/config/schema_optim.cpp
  ${CMAKE_CURRENT_LIST_DIR}/config/config.cpp
  ${CMAKE_CURRENT_LIST_DIR}/config/stage_traits.cpp
  ${CMAKE_CURRENT_LIST_DIR}/config/checks.cpp
  ${CMAKE_CURRENT_LIST_DIR}/config/batch.cpp
  ${CMAKE_CURRENT_LIST_DIR}/config/resolve.cpp
  ${CMAKE_CURRENT_LIST_DIR}/config/trainer_blocks.cpp
  ${CMAKE_CURRENT_LIST_DIR}/config/effective.cpp
  ${CMAKE_CURRENT_LIST_DIR}/config/spelled_auto.cpp
)
