//! Protobuf types generated from `proto/` by `build.rs` (prost for the binary
//! codec, pbjson for the proto3 JSON mapping).

#![allow(missing_docs, clippy::all, unreachable_pub)]

pub mod psdb {
    pub mod v1alpha1 {
        include!(concat!(env!("OUT_DIR"), "/psdb.v1alpha1.rs"));
        include!(concat!(env!("OUT_DIR"), "/psdb.v1alpha1.serde.rs"));
    }
    pub mod data {
        pub mod v1 {
            include!(concat!(env!("OUT_DIR"), "/psdb.data.v1.rs"));
            include!(concat!(env!("OUT_DIR"), "/psdb.data.v1.serde.rs"));
        }
    }
}

pub mod vitess {
    pub mod query {
        pub mod v22 {
            include!(concat!(env!("OUT_DIR"), "/vitess.query.v22.rs"));
            include!(concat!(env!("OUT_DIR"), "/vitess.query.v22.serde.rs"));
        }
    }
    pub mod vtgate {
        pub mod v22 {
            include!(concat!(env!("OUT_DIR"), "/vitess.vtgate.v22.rs"));
            include!(concat!(env!("OUT_DIR"), "/vitess.vtgate.v22.serde.rs"));
        }
    }
    pub mod vtrpc {
        pub mod v22 {
            include!(concat!(env!("OUT_DIR"), "/vitess.vtrpc.v22.rs"));
            include!(concat!(env!("OUT_DIR"), "/vitess.vtrpc.v22.serde.rs"));
        }
    }
    pub mod topodata {
        pub mod v22 {
            include!(concat!(env!("OUT_DIR"), "/vitess.topodata.v22.rs"));
            include!(concat!(env!("OUT_DIR"), "/vitess.topodata.v22.serde.rs"));
        }
    }
}

pub use psdb::v1alpha1::{
    CloseSessionRequest, CloseSessionResponse, CreateSessionRequest, CreateSessionResponse,
    ExecuteRequest, ExecuteResponse, LocalInfileData, LocalInfileRequest, PrepareRequest,
    PrepareResponse, Session, User,
};
pub use vitess::query::v22::{BindVariable, Field, QueryResult, QueryWarning, Row, Type, Value};
pub use vitess::vtgate::v22::Session as VitessSession;
pub use vitess::vtrpc::v22::{Code as VtCode, RpcError};
