//! MySQL ⇄ psdb translation as pure functions: type mapping, rows, bind
//! variables, error numbers and statement classification. No I/O.

pub mod bind;
pub mod connection_status;
pub mod cursor;
pub mod errors;
pub mod out_params;
pub mod params;
pub mod results;
pub mod rows;
pub mod session_track;
pub mod sql_text;
pub mod statement;
pub mod statistics;
pub mod to_mysql;
pub mod types;
pub mod well_formed;
