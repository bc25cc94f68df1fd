//! RabbitMQ on the consuming side: headers of job messages, the topology, the consumer, and the
//! dead letters it places.

pub mod consumer;
pub mod dead_letter;
pub mod headers;
pub mod topology;
