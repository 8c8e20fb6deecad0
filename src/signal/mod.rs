//! Signals: CloudEvents 1.0.2 envelopes, the router and dispatch.
