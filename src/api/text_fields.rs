//! The proto3 JSON form of the two requests that carry SQL text, of
//! `Field`, `QueryWarning` and `RPCError`, whose names and messages are
//! bytes in our proto, and of `PrepareResponse`, whose extension field
//! (`param_fields`) stays out of JSON as `Field.extended_metadata` does: a
//! JSON client generated from the published proto may refuse a field it
//! does not know.
//!
//! `ExecuteRequest.query` and `PrepareRequest.query` are `bytes` in our
//! copy of the proto (the protobuf wire form of a string), so that SQL in
//! any connection character set reaches the backend byte for byte. Their
//! JSON form stays what the published API says — a string — so these two
//! messages get this hand-written mapping instead of pbjson's (which
//! would use base64). JSON can only carry text: a query that is not UTF-8
//! fails to encode with a clear error, never an altered one.

use std::collections::HashMap;
use std::fmt;

use bytes::Bytes;
use serde::de::{self, MapAccess, Visitor};
use serde::ser::{self, SerializeStruct};

use super::pb::{
    BindVariable, ExecuteRequest, Field, PrepareRequest, PrepareResponse, QueryWarning, RpcError,
    Session, Type, VtCode,
};

/// The fields both requests share, plus `prepared` (Execute only).
#[derive(Default)]
struct QueryRequest {
    session: Option<Session>,
    query: Bytes,
    bind_variables: HashMap<String, BindVariable>,
    prepared: bool,
}

const EXECUTE_FIELDS: &[&str] = &[
    "session",
    "query",
    "bind_variables",
    "bindVariables",
    "prepared",
];
const PREPARE_FIELDS: &[&str] = &["session", "query", "bind_variables", "bindVariables"];

fn query_text<E: ser::Error>(query: &[u8]) -> Result<&str, E> {
    std::str::from_utf8(query).map_err(|_| {
        E::custom("the query is not valid UTF-8, which JSON cannot carry; use application/proto")
    })
}

fn serialize_request<S: serde::Serializer>(
    serializer: S,
    name: &'static str,
    request: &QueryRequest,
    with_prepared: bool,
) -> Result<S::Ok, S::Error> {
    let fields = usize::from(request.session.is_some())
        + usize::from(!request.query.is_empty())
        + usize::from(!request.bind_variables.is_empty())
        + usize::from(with_prepared && request.prepared);
    let mut out = serializer.serialize_struct(name, fields)?;
    if let Some(session) = &request.session {
        out.serialize_field("session", session)?;
    }
    if !request.query.is_empty() {
        out.serialize_field("query", query_text::<S::Error>(&request.query)?)?;
    }
    if !request.bind_variables.is_empty() {
        out.serialize_field("bindVariables", &request.bind_variables)?;
    }
    if with_prepared && request.prepared {
        out.serialize_field("prepared", &true)?;
    }
    out.end()
}

struct RequestVisitor {
    name: &'static str,
    fields: &'static [&'static str],
}

impl<'de> Visitor<'de> for RequestVisitor {
    type Value = QueryRequest;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "struct {}", self.name)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<QueryRequest, A::Error> {
        let mut request = QueryRequest::default();
        let mut seen: Vec<&'static str> = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            let Some(&field) = self.fields.iter().find(|f| **f == key) else {
                return Err(de::Error::unknown_field(&key, self.fields));
            };
            // `bind_variables` and `bindVariables` are one field.
            let canonical = if field == "bindVariables" {
                "bind_variables"
            } else {
                field
            };
            if seen.contains(&canonical) {
                return Err(de::Error::duplicate_field(canonical));
            }
            seen.push(canonical);
            match canonical {
                "session" => request.session = map.next_value()?,
                "query" => {
                    let text: Option<String> = map.next_value()?;
                    request.query = text.map(Bytes::from).unwrap_or_default();
                }
                "bind_variables" => {
                    let vars: Option<HashMap<String, BindVariable>> = map.next_value()?;
                    request.bind_variables = vars.unwrap_or_default();
                }
                _ => {
                    let prepared: Option<bool> = map.next_value()?;
                    request.prepared = prepared.unwrap_or_default();
                }
            }
        }
        Ok(request)
    }
}

impl serde::Serialize for ExecuteRequest {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let request = QueryRequest {
            session: self.session.clone(),
            query: self.query.clone(),
            bind_variables: self.bind_variables.clone(),
            prepared: self.prepared,
        };
        serialize_request(serializer, "psdb.v1alpha1.ExecuteRequest", &request, true)
    }
}

impl<'de> serde::Deserialize<'de> for ExecuteRequest {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let visitor = RequestVisitor {
            name: "psdb.v1alpha1.ExecuteRequest",
            fields: EXECUTE_FIELDS,
        };
        let r = deserializer.deserialize_struct(visitor.name, EXECUTE_FIELDS, visitor)?;
        Ok(ExecuteRequest {
            session: r.session,
            query: r.query,
            bind_variables: r.bind_variables,
            prepared: r.prepared,
            // A file cannot travel in the JSON form: such a statement
            // gets the server's answer to a client that cannot send one.
            local_infile: false,
            local_infile_data: None,
        })
    }
}

impl serde::Serialize for PrepareRequest {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let request = QueryRequest {
            session: self.session.clone(),
            query: self.query.clone(),
            bind_variables: self.bind_variables.clone(),
            prepared: false,
        };
        serialize_request(serializer, "psdb.v1alpha1.PrepareRequest", &request, false)
    }
}

impl<'de> serde::Deserialize<'de> for PrepareRequest {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let visitor = RequestVisitor {
            name: "psdb.v1alpha1.PrepareRequest",
            fields: PREPARE_FIELDS,
        };
        let r = deserializer.deserialize_struct(visitor.name, PREPARE_FIELDS, visitor)?;
        Ok(PrepareRequest {
            session: r.session,
            query: r.query,
            bind_variables: r.bind_variables,
        })
    }
}

/// A `PrepareResponse` as the API's JSON reads it: the published fields
/// only (`null` is the default, as pbjson reads it).
#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
struct PrepareResponseIn {
    session: Option<Session>,
    #[serde(deserialize_with = "or_default")]
    fields: Vec<Field>,
    error: Option<RpcError>,
    #[serde(alias = "params_count")]
    params_count: Option<::pbjson::private::NumberDeserialize<u32>>,
}

/// … and writes it, defaults omitted.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct PrepareResponseOut<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    session: Option<&'a Session>,
    #[serde(skip_serializing_if = "<[Field]>::is_empty")]
    fields: &'a [Field],
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a RpcError>,
    #[serde(skip_serializing_if = "is_zero")]
    params_count: u32,
}

fn or_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de> + Default,
{
    <Option<T> as serde::Deserialize>::deserialize(d).map(Option::unwrap_or_default)
}

impl serde::Serialize for PrepareResponse {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        PrepareResponseOut {
            session: self.session.as_ref(),
            fields: &self.fields,
            error: self.error.as_ref(),
            params_count: self.params_count,
        }
        .serialize(serializer)
    }
}

impl<'de> serde::Deserialize<'de> for PrepareResponse {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = PrepareResponseIn::deserialize(deserializer)?;
        Ok(PrepareResponse {
            session: text.session,
            fields: text.fields,
            error: text.error,
            params_count: text.params_count.map_or(0, |n| n.0),
            // Protobuf only, as `Field.extended_metadata`.
            param_fields: Vec::new(),
        })
    }
}

/// A `Field` as the API's JSON writes it: names are strings there.
/// Names that are not UTF-8 (a latin1 alias) cannot be JSON strings: a
/// JSON client gets them with U+FFFD (protobuf clients, the sidecar among
/// them, get the bytes).
#[derive(serde::Serialize, serde::Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct FieldText {
    #[serde(skip_serializing_if = "String::is_empty")]
    name: String,
    #[serde(
        rename = "type",
        skip_serializing_if = "Option::is_none",
        with = "field_type"
    )]
    r#type: Option<Type>,
    #[serde(skip_serializing_if = "String::is_empty")]
    table: String,
    #[serde(skip_serializing_if = "String::is_empty", alias = "org_table")]
    org_table: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    database: String,
    #[serde(skip_serializing_if = "String::is_empty", alias = "org_name")]
    org_name: String,
    #[serde(
        skip_serializing_if = "is_zero",
        alias = "column_length",
        deserialize_with = "number"
    )]
    column_length: u32,
    #[serde(skip_serializing_if = "is_zero", deserialize_with = "number")]
    charset: u32,
    #[serde(skip_serializing_if = "is_zero", deserialize_with = "number")]
    decimals: u32,
    #[serde(skip_serializing_if = "is_zero", deserialize_with = "number")]
    flags: u32,
    #[serde(skip_serializing_if = "String::is_empty", alias = "column_type")]
    column_type: String,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

/// proto3 JSON takes a number or a string holding one.
fn number<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    serde::Deserialize::deserialize(d).map(|n: ::pbjson::private::NumberDeserialize<u32>| n.0)
}

/// `Type` by name (or number), as pbjson maps enums; `UNKNOWN`-free.
mod field_type {
    use super::Type;

    pub fn serialize<S: serde::Serializer>(ty: &Option<Type>, s: S) -> Result<S::Ok, S::Error> {
        match ty {
            Some(ty) => serde::Serialize::serialize(ty, s),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Type>, D::Error> {
        <Option<Type> as serde::Deserialize>::deserialize(d)
    }
}

/// JSON strings carry only UTF-8: response names and messages that are
/// not get U+FFFD (a request's `query` is refused instead).
fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

impl serde::Serialize for Field {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let ty =
            match self.r#type {
                0 => None,
                n => Some(Type::try_from(n).map_err(|_| {
                    <S::Error as ser::Error>::custom(format!("Invalid variant {n}"))
                })?),
            };
        FieldText {
            name: lossy(&self.name),
            r#type: ty,
            table: lossy(&self.table),
            org_table: lossy(&self.org_table),
            database: lossy(&self.database),
            org_name: lossy(&self.org_name),
            column_length: self.column_length,
            charset: self.charset,
            decimals: self.decimals,
            flags: self.flags,
            column_type: self.column_type.clone(),
        }
        .serialize(serializer)
    }
}

impl<'de> serde::Deserialize<'de> for Field {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = FieldText::deserialize(deserializer)?;
        Ok(Field {
            name: Bytes::from(text.name),
            r#type: text.r#type.map_or(0, |t| t as i32),
            table: Bytes::from(text.table),
            org_table: Bytes::from(text.org_table),
            database: Bytes::from(text.database),
            org_name: Bytes::from(text.org_name),
            column_length: text.column_length,
            charset: text.charset,
            decimals: text.decimals,
            flags: text.flags,
            column_type: text.column_type,
            // Protobuf only: the sidecar reads it, JSON clients have no use.
            extended_metadata: Bytes::new(),
        })
    }
}

/// An `RPCError` as the API's JSON writes it: the message is a string
/// there (bytes that are not UTF-8 become U+FFFD, as for names).
#[derive(serde::Serialize, serde::Deserialize, Default)]
#[serde(default)]
struct RpcErrorText {
    #[serde(skip_serializing_if = "String::is_empty")]
    message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    code: Option<VtCode>,
}

impl serde::Serialize for RpcError {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let code =
            match self.code {
                0 => None,
                n => Some(VtCode::try_from(n).map_err(|_| {
                    <S::Error as ser::Error>::custom(format!("Invalid variant {n}"))
                })?),
            };
        RpcErrorText {
            message: lossy(&self.message),
            code,
        }
        .serialize(serializer)
    }
}

impl<'de> serde::Deserialize<'de> for RpcError {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = RpcErrorText::deserialize(deserializer)?;
        Ok(RpcError {
            message: Bytes::from(text.message),
            code: text.code.map_or(0, |c| c as i32),
        })
    }
}

/// A `QueryWarning` as the API's JSON writes it (the message a string).
#[derive(serde::Serialize, serde::Deserialize, Default)]
#[serde(default)]
struct QueryWarningText {
    #[serde(skip_serializing_if = "is_zero", deserialize_with = "number")]
    code: u32,
    #[serde(skip_serializing_if = "String::is_empty")]
    message: String,
}

impl serde::Serialize for QueryWarning {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        QueryWarningText {
            code: self.code,
            message: lossy(&self.message),
        }
        .serialize(serializer)
    }
}

impl<'de> serde::Deserialize<'de> for QueryWarning {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = QueryWarningText::deserialize(deserializer)?;
        Ok(QueryWarning {
            code: text.code,
            message: Bytes::from(text.message),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_is_a_json_string_both_ways() {
        let json = r#"{"query":"SELECT 'é'","bindVariables":{"v1":{"type":"INT64","value":"MQ=="}},"prepared":true}"#;
        let request: ExecuteRequest = serde_json::from_str(json).unwrap();
        assert_eq!(&request.query[..], "SELECT 'é'".as_bytes());
        assert!(request.prepared);
        assert_eq!(&request.bind_variables["v1"].value[..], b"1");
        let back = serde_json::to_string(&request).unwrap();
        let again: ExecuteRequest = serde_json::from_str(&back).unwrap();
        assert_eq!(again, request);
        let snake: PrepareRequest =
            serde_json::from_str(r#"{"query":"SELECT ?","bind_variables":{}}"#).unwrap();
        assert_eq!(&snake.query[..], b"SELECT ?");
    }

    #[test]
    fn defaults_are_omitted_and_null_is_default() {
        assert_eq!(
            serde_json::to_string(&ExecuteRequest::default()).unwrap(),
            "{}"
        );
        let r: ExecuteRequest =
            serde_json::from_str(r#"{"query":null,"session":null,"prepared":null}"#).unwrap();
        assert_eq!(r, ExecuteRequest::default());
    }

    #[test]
    fn text_json_cannot_carry_is_refused_not_altered() {
        let request = ExecuteRequest {
            query: Bytes::from_static(b"SELECT '\xe5\x81\\'"),
            ..Default::default()
        };
        let e = serde_json::to_string(&request).unwrap_err();
        assert!(e.to_string().contains("not valid UTF-8"), "{e}");
    }

    #[test]
    fn unknown_and_duplicate_fields_are_errors() {
        assert!(serde_json::from_str::<PrepareRequest>(r#"{"prepared":true}"#).is_err());
        assert!(serde_json::from_str::<ExecuteRequest>(r#"{"sql":"x"}"#).is_err());
        assert!(
            serde_json::from_str::<ExecuteRequest>(r#"{"bindVariables":{},"bind_variables":{}}"#)
                .is_err()
        );
    }
    #[test]
    fn field_names_are_json_strings_and_protobuf_bytes() {
        use prost::Message;
        let field = Field {
            name: Bytes::from_static(b"caf\xe9"),
            r#type: Type::Varchar as i32,
            org_table: Bytes::from_static(b"t"),
            column_length: 40,
            charset: 8,
            ..Field::default()
        };
        // Protobuf: the latin1 byte crosses as it is.
        let back = Field::decode(&field.encode_to_vec()[..]).unwrap();
        assert_eq!(&back.name[..], b"caf\xe9");
        // JSON: strings (a name JSON cannot carry gets U+FFFD), defaults
        // omitted, the type by name.
        let json = serde_json::to_value(&field).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"name": "caf\u{fffd}", "type": "VARCHAR", "orgTable": "t",
                               "columnLength": 40, "charset": 8})
        );
        let read: Field = serde_json::from_value(serde_json::json!(
            {"name": "é", "type": "INT64", "org_table": "t", "columnLength": "7", "flags": 3}
        ))
        .unwrap();
        assert_eq!(&read.name[..], "é".as_bytes());
        assert_eq!(read.r#type, Type::Int64 as i32);
        assert_eq!(&read.org_table[..], b"t");
        assert_eq!((read.column_length, read.flags), (7, 3));
        let empty: Field = serde_json::from_str("{}").unwrap();
        assert_eq!(empty, Field::default());
    }

    /// The parameter definitions are our extension: protobuf only.
    #[test]
    fn a_prepare_responses_json_is_the_published_fields() {
        use prost::Message;
        let param = Field {
            name: Bytes::from_static(b"a"),
            r#type: Type::Int64 as i32,
            ..Field::default()
        };
        let response = PrepareResponse {
            fields: vec![param.clone()],
            params_count: 1,
            param_fields: vec![param.clone()],
            ..Default::default()
        };
        let back = PrepareResponse::decode(&response.encode_to_vec()[..]).unwrap();
        assert_eq!(back, response);
        let json = serde_json::to_value(&response).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"fields": [{"name": "a", "type": "INT64"}], "paramsCount": 1})
        );
        let read: PrepareResponse = serde_json::from_value(json).unwrap();
        assert_eq!(read.param_fields, []);
        assert_eq!((read.fields, read.params_count), (vec![param], 1));
        let snake: PrepareResponse =
            serde_json::from_str(r#"{"params_count":"3","fields":null,"session":null}"#).unwrap();
        assert_eq!(snake.params_count, 3);
        assert_eq!(
            serde_json::to_string(&PrepareResponse::default()).unwrap(),
            "{}"
        );
        assert!(serde_json::from_str::<PrepareResponse>(r#"{"paramFields":[]}"#).is_err());
    }

    #[test]
    fn messages_are_json_strings_and_protobuf_bytes() {
        use prost::Message;
        let error = RpcError {
            message: Bytes::from_static(b"near '\xe9' (errno 1064) (sqlstate 42000)"),
            code: VtCode::InvalidArgument as i32,
        };
        assert_eq!(RpcError::decode(&error.encode_to_vec()[..]).unwrap(), error);
        assert_eq!(
            serde_json::to_value(&error).unwrap(),
            serde_json::json!({"message": "near '\u{fffd}' (errno 1064) (sqlstate 42000)",
                               "code": "INVALID_ARGUMENT"})
        );
        let read: RpcError =
            serde_json::from_value(serde_json::json!({"message": "é", "code": 3})).unwrap();
        assert_eq!((&read.message[..], read.code), ("é".as_bytes(), 3));
        assert_eq!(serde_json::to_string(&RpcError::default()).unwrap(), "{}");

        let warning = QueryWarning {
            code: 1265,
            message: Bytes::from_static(b"Data truncated for column '\xe9'"),
        };
        assert_eq!(
            QueryWarning::decode(&warning.encode_to_vec()[..]).unwrap(),
            warning
        );
        let json = serde_json::to_value(&warning).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"code": 1265, "message": "Data truncated for column '\u{fffd}'"})
        );
        let read: QueryWarning =
            serde_json::from_value(serde_json::json!({"code": "1265", "message": "ok"})).unwrap();
        assert_eq!((read.code, &read.message[..]), (1265, &b"ok"[..]));
    }
}
