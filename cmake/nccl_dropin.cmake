# libnccl.so.2: DCCL under NCCL's name, for programs built against NVIDIA's NCCL 2.28 (nccl-tests, PyTorch). The
# same objects as libdccl, combined into one relocatable object whose nccl* functions are made weak; the strong
# pnccl* twins are defined by the linker at the same addresses (NVIDIA's layout: a profiler may interpose nccl*
# and call pnccl*). The version script exports those names alone, with no symbol versions; -Bsymbolic binds the
# library's own calls inside it. Checked by tests/check_nccl_exports.sh against cmake/nccl_exports.txt and, where
# the CUDA toolkit has it, NVIDIA's own library.
file(STRINGS ${PROJECT_SOURCE_DIR}/cmake/nccl_exports.txt DCCL_NCCL_NAMES REGEX "^nccl")
set(DCCL_NCCL_WEAKEN "")
set(DCCL_NCCL_TWINS "")
foreach(name ${DCCL_NCCL_NAMES})
  if(name STREQUAL "ncclResetDebugInitInternal")
    continue()
  endif()
  list(APPEND DCCL_NCCL_WEAKEN --weaken-symbol=${name})
  list(APPEND DCCL_NCCL_TWINS "-Wl,--defsym=p${name}=${name}")
endforeach()
set(DCCL_NCCL_ALL ${PROJECT_BINARY_DIR}/dccl_all.o)
set(DCCL_NCCL_OBJ ${PROJECT_BINARY_DIR}/dccl_as_nccl.o)
add_custom_command(OUTPUT ${DCCL_NCCL_OBJ}
                   COMMAND ${CMAKE_LINKER} -r -o ${DCCL_NCCL_ALL} $<TARGET_OBJECTS:dccl_objs>
                   COMMAND ${CMAKE_OBJCOPY} ${DCCL_NCCL_WEAKEN} ${DCCL_NCCL_ALL} ${DCCL_NCCL_OBJ}
                   DEPENDS dccl_objs $<TARGET_OBJECTS:dccl_objs> ${PROJECT_SOURCE_DIR}/cmake/nccl_exports.txt
                   COMMENT "Combining DCCL's objects for libnccl.so.2" COMMAND_EXPAND_LISTS VERBATIM)
set_source_files_properties(${DCCL_NCCL_OBJ} PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
add_library(nccl_dropin SHARED ${DCCL_NCCL_OBJ})
set_target_properties(nccl_dropin PROPERTIES OUTPUT_NAME nccl VERSION 2.28.9 SOVERSION 2 LINKER_LANGUAGE C
                                             LINK_DEPENDS ${PROJECT_SOURCE_DIR}/cmake/nccl_exports.map)
target_link_libraries(nccl_dropin PRIVATE $<TARGET_PROPERTY:dccl_objs,INTERFACE_LINK_LIBRARIES>)
target_link_options(nccl_dropin PRIVATE -Wl,-Bsymbolic -Wl,--no-undefined
                    -Wl,--version-script=${PROJECT_SOURCE_DIR}/cmake/nccl_exports.map ${DCCL_NCCL_TWINS})
install(TARGETS nccl_dropin LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
