//! TRON rules that need no node: what a transaction will cost in bandwidth, energy and burned
//! TRX ([`resources`]). The TRON adapter gathers the inputs (account resources, chain
//! parameters, the node's energy estimate) and reads back what was actually charged.

pub mod resources;

#[cfg(test)]
mod proptests;
