//! Generates the psdb/Vitess protobuf types (prost) and their proto3 JSON
//! mapping (pbjson) from `proto/`, with the pure-Rust `protox` compiler so a
//! fresh machine needs no `protoc` binary.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = ["proto/psdb/v1alpha1/database.proto"];
    println!("cargo:rerun-if-changed=proto");
    // Set by `cargo fuzz` (tests/fuzz/): src/lib.rs's `fuzzing` module.
    println!("cargo::rustc-check-cfg=cfg(fuzzing)");
    let fds = protox::compile(protos, ["proto"])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    let descriptor_path = out.join("descriptors.bin");
    std::fs::write(&descriptor_path, prost::Message::encode_to_vec(&fds))?;

    prost_build::Config::new().bytes(["."]).compile_fds(fds)?;

    let descriptors = std::fs::read(&descriptor_path)?;
    pbjson_build::Builder::new()
        .register_descriptors(&descriptors)?
        // Their `query` (and a Field's names, error and warning messages)
        // are bytes in our proto (text in any character set) but strings in
        // the API's JSON, and PrepareResponse's extension field stays out of
        // it: src/api/text_fields.rs.
        .exclude([
            ".psdb.v1alpha1.ExecuteRequest",
            ".psdb.v1alpha1.PrepareRequest",
            ".psdb.v1alpha1.PrepareResponse",
            ".vitess.query.v22.Field",
            ".vitess.query.v22.QueryWarning",
            ".vitess.vtrpc.v22.RPCError",
        ])
        .build(&[".psdb", ".vitess"])?;
    Ok(())
}
