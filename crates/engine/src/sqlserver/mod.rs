//! SQL Server datasources: schema discovery from `INFORMATION_SCHEMA`, and rows streamed from
//! tiberius into the result, each value written as its type maps ([`values`]).

mod values;
