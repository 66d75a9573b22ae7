//! Withdrawal and swap quotes against ports whose calls each test states in advance: which
//! ports a quote asks, and what it answers when one refuses or a switch is off.

mod swap;
mod withdrawal;
mod world;
