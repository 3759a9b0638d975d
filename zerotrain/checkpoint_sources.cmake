# The sources of libzerotrain_checkpoint_io (reading and writing checkpoint files: no
# LibTorch), as absolute paths, shared with the sanitizer build of the checkpoint-reader
# fuzz target (fuzz/CMakeLists.txt).
set(ZEROTRAIN_CHECKPOINT_IO_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/checkpoint/safetensors.cpp
  ${CMAKE_CURRENT_LIST_DIR}/checkpoint/file_io.cpp
  ${CMAKE_CURRENT_LIST_DIR}/checkpoint/manifest.cpp
  ${CMAKE_CURRENT_LIST_DIR}/checkpoint/reader.cpp
  ${CMAKE_CURRENT_LIST_DIR}/checkpoint/writer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/checkpoint/float_convert.cpp
  ${CMAKE_CURRENT_LIST_DIR}/checkpoint/sharded_writer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/checkpoint/consolidate.cpp
  ${CMAKE_CURRENT_LIST_DIR}/checkpoint/locate.cpp
)
