# One precompiled header of the LibTorch API, built once and shared by every target that
# includes LibTorch headers: on 2 cores the headers alone cost most of a LibTorch TU's
# 15-25 s (docs/building.md, build times). Sources that include no LibTorch header should be
# marked SKIP_PRECOMPILE_HEADERS so they do not pay for loading it.
function(zerotrain_torch_pch target)
  get_property(owner GLOBAL PROPERTY ZEROTRAIN_TORCH_PCH_OWNER)
  if(NOT owner)
    target_precompile_headers(${target} PRIVATE ${PROJECT_SOURCE_DIR}/zerotrain/core/torch_pch.h)
    set_property(GLOBAL PROPERTY ZEROTRAIN_TORCH_PCH_OWNER ${target})
  elseif(NOT owner STREQUAL target)
    target_precompile_headers(${target} REUSE_FROM ${owner})
  endif()
endfunction()
