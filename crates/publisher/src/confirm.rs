//! The broker's confirms turned into one outcome per event, returns matched by message id.

use std::collections::HashMap;

use contract::event::OutboundEvent;
use lapin::message::BasicReturnMessage;
use lapin::Confirmation;

use crate::error::{PublishError, Result};

/// What became of one sent message: its confirmation, or why none arrived.
pub(crate) type Confirmed = (usize, Result<Confirmation>);

/// Writes the outcome of every confirmed message into `results` (indexed like `events`) and
/// returns the first failure that condemns the channel (anything but a nack or a return).
///
/// With `mandatory`, RabbitMQ sends `basic.return` before the `basic.ack` of the same message,
/// and lapin hands the returned message to whichever pending confirm that ack completes first,
/// which with a multiple ack may be another message of the batch. So a return is matched to
/// its event by `message_id` (the ce-id), not by the confirm that carried it.
pub(crate) fn settle(
    events: &[OutboundEvent],
    confirmed: Vec<Confirmed>,
    results: &mut [Result<()>],
) -> Option<PublishError> {
    let mut returned: Vec<BasicReturnMessage> = Vec::new();
    let mut condemning: Option<PublishError> = None;
    for (index, outcome) in confirmed {
        let result = match outcome {
            Ok(Confirmation::Ack(message)) => {
                returned.extend(message);
                Ok(())
            }
            Ok(Confirmation::Nack(message)) => {
                returned.extend(message);
                Err(PublishError::Nack)
            }
            Ok(Confirmation::NotRequested) => Err(PublishError::NotConfirmed),
            Err(error) => Err(error),
        };
        if let Err(error) = &result {
            if condemning.is_none() && !matches!(error, PublishError::Nack) {
                condemning = Some(error.clone());
            }
        }
        results[index] = result;
    }
    if !returned.is_empty() {
        attribute_returns(events, returned, results);
    }
    condemning
}

/// Marks, for each returned message, the first still-successful event with its message id.
fn attribute_returns(
    events: &[OutboundEvent],
    returned: Vec<BasicReturnMessage>,
    results: &mut [Result<()>],
) {
    let mut by_id: HashMap<&str, Vec<usize>> = HashMap::new();
    for (index, event) in events.iter().enumerate().rev() {
        by_id.entry(event.ce_id()).or_default().push(index);
    }
    for message in returned {
        let id = message.delivery.properties.message_id().as_ref();
        let index = id
            .and_then(|id| by_id.get_mut(id.as_str()))
            .and_then(|candidates| {
                // Candidates are stacked last-first, so popping walks the batch in order.
                while let Some(index) = candidates.pop() {
                    if results[index].is_ok() {
                        return Some(index);
                    }
                }
                None
            });
        match index {
            Some(index) => {
                results[index] = Err(PublishError::Returned {
                    reply_code: message.reply_code,
                    reply_text: message.reply_text.to_string(),
                });
            }
            None => tracing::warn!(
                reply_code = message.reply_code,
                "The broker returned a message that matches no event of this publish."
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;
    use contract::event::{CloudEventAttributes, TerminalStatus};
    use lapin::message::Delivery;
    use lapin::BasicProperties;
    use uuid::Uuid;

    fn event() -> OutboundEvent {
        let job = Uuid::new_v4();
        OutboundEvent {
            attributes: CloudEventAttributes::new(
                TerminalStatus::Completed,
                job,
                "src",
                None,
                Utc::now(),
            ),
            request_id: None,
            body: b"{}".to_vec(),
        }
    }

    fn returned(event: &OutboundEvent) -> BasicReturnMessage {
        let mut delivery = Delivery::mock(
            0,
            "x".into(),
            event.routing_key().into(),
            false,
            event.body.clone(),
        );
        delivery.properties = BasicProperties::default().with_message_id(event.ce_id().into());
        BasicReturnMessage {
            delivery,
            reply_code: 312,
            reply_text: "NO_ROUTE".into(),
        }
    }

    fn pending(n: usize) -> Vec<Result<()>> {
        (0..n).map(|_| Ok(())).collect()
    }

    #[test]
    fn a_return_carried_by_another_confirm_fails_its_own_event() {
        let events = [event(), event(), event()];
        // The broker returned event 2, but lapin attached the return to event 0's confirm (the
        // first one a multiple ack completed).
        let confirmed = vec![
            (0, Ok(Confirmation::Ack(Some(returned(&events[2]))))),
            (1, Ok(Confirmation::Ack(None))),
            (2, Ok(Confirmation::Ack(None))),
        ];
        let mut results = pending(3);
        assert!(settle(&events, confirmed, &mut results).is_none());
        assert!(results[0].is_ok());
        assert!(results[1].is_ok());
        assert!(matches!(
            &results[2],
            Err(PublishError::Returned { reply_code: 312, reply_text }) if reply_text == "NO_ROUTE"
        ));
    }

    #[test]
    fn duplicate_events_take_one_return_each() {
        let first = event();
        let events = [first.clone(), first.clone(), first.clone()];
        let confirmed = vec![
            (0, Ok(Confirmation::Ack(Some(returned(&first))))),
            (1, Ok(Confirmation::Ack(Some(returned(&first))))),
            (2, Ok(Confirmation::Ack(None))),
        ];
        let mut results = pending(3);
        settle(&events, confirmed, &mut results);
        assert_eq!(results.iter().filter(|r| r.is_err()).count(), 2);
        assert!(results[2].is_ok(), "returns go to the earliest candidates");
    }

    #[test]
    fn a_nack_fails_its_event_but_keeps_the_channel() {
        let events = [event(), event()];
        let confirmed = vec![
            (0, Ok(Confirmation::Nack(None))),
            (1, Ok(Confirmation::Ack(None))),
        ];
        let mut results = pending(2);
        assert!(settle(&events, confirmed, &mut results).is_none());
        assert!(matches!(results[0], Err(PublishError::Nack)));
        assert!(results[1].is_ok());
    }

    #[test]
    fn a_missing_confirm_condemns_the_channel() {
        let events = [event(), event()];
        let timeout = std::time::Duration::from_secs(1);
        let confirmed = vec![
            (0, Ok(Confirmation::Ack(None))),
            (1, Err(PublishError::ConfirmTimeout(timeout))),
        ];
        let mut results = pending(2);
        let condemning = settle(&events, confirmed, &mut results);
        assert!(matches!(condemning, Some(PublishError::ConfirmTimeout(_))));
        assert!(results[0].is_ok());
        assert!(matches!(results[1], Err(PublishError::ConfirmTimeout(_))));
    }

    #[test]
    fn unrequested_confirms_do_not_count_as_published() {
        let events = [event()];
        let mut results = pending(1);
        let condemning = settle(
            &events,
            vec![(0, Ok(Confirmation::NotRequested))],
            &mut results,
        );
        assert!(matches!(results[0], Err(PublishError::NotConfirmed)));
        assert!(condemning.is_some());
    }
}
