//! RabbitMQ on the consuming side: headers of job messages, the topology, the consumer.

pub mod consumer;
pub mod headers;
pub mod topology;
