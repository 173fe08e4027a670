# linkfit_grpc_proto(<target> <file.proto>): compiles an in-tree .proto subset with Debian's
# protoc and grpc_cpp_plugin into a static library <target> of its own, without linkfit's warning
# flags (generated code). Its headers (<name>.pb.h, <name>.grpc.pb.h) are on the target's include
# path.
find_package(Protobuf REQUIRED)
find_package(gRPC CONFIG REQUIRED)
find_program(LINKFIT_GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)

function(linkfit_grpc_proto target proto)
  get_filename_component(proto_path ${proto} ABSOLUTE)
  get_filename_component(proto_dir ${proto_path} DIRECTORY)
  get_filename_component(proto_name ${proto_path} NAME_WE)
  set(out ${CMAKE_CURRENT_BINARY_DIR}/${target})
  set(generated ${out}/${proto_name}.pb.cc ${out}/${proto_name}.pb.h
                ${out}/${proto_name}.grpc.pb.cc ${out}/${proto_name}.grpc.pb.h)
  add_custom_command(
    OUTPUT ${generated}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${out}
    COMMAND protobuf::protoc --proto_path=${proto_dir} --cpp_out=${out} --grpc_out=${out}
            --plugin=protoc-gen-grpc=${LINKFIT_GRPC_CPP_PLUGIN} ${proto_path}
    DEPENDS ${proto_path}
    COMMENT "protoc: ${proto_name}.proto")
  add_library(${target} STATIC ${generated})
  target_include_directories(${target} SYSTEM PUBLIC ${out})
  target_link_libraries(${target} PUBLIC gRPC::grpc++ protobuf::libprotobuf)
endfunction()

# linkfit_proto(<target> <file.proto>...): messages only (no services), with protoc into a static
# library <target>, likewise without linkfit's warning flags; headers <name>.pb.h.
function(linkfit_proto target)
  set(generated)
  set(out ${CMAKE_CURRENT_BINARY_DIR}/${target})
  foreach(proto ${ARGN})
    get_filename_component(proto_path ${proto} ABSOLUTE)
    get_filename_component(proto_dir ${proto_path} DIRECTORY)
    get_filename_component(proto_name ${proto_path} NAME_WE)
    add_custom_command(
      OUTPUT ${out}/${proto_name}.pb.cc ${out}/${proto_name}.pb.h
      COMMAND ${CMAKE_COMMAND} -E make_directory ${out}
      COMMAND protobuf::protoc --proto_path=${proto_dir} --cpp_out=${out} ${proto_path}
      DEPENDS ${proto_path}
      COMMENT "protoc: ${proto_name}.proto")
    list(APPEND generated ${out}/${proto_name}.pb.cc ${out}/${proto_name}.pb.h)
  endforeach()
  add_library(${target} STATIC ${generated})
  target_include_directories(${target} SYSTEM PUBLIC ${out})
  target_link_libraries(${target} PUBLIC protobuf::libprotobuf)
endfunction()
