//! TRON rules that need no node: what a transaction will cost in bandwidth, energy and burned
//! TRX ([`resources`]), and the stake that lends a given energy ([`delegation`]). The TRON
//! adapter gathers the inputs (account resources, chain parameters, the node's energy
//! estimate, the delegatable stake) and reads back what was actually charged.

pub mod delegation;
pub mod resources;

#[cfg(test)]
mod proptests;
