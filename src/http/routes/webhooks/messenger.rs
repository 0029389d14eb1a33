//! `GET|POST /webhooks/messenger[/{app}]`: the Meta app's handshake (the same for its WhatsApp,
//! Messenger and Instagram webhooks) and its signed Messenger (`object: page`) and Instagram
//! (`object: instagram`) deliveries.

super::meta::meta_webhook!("/webhooks/messenger",
    ids: ["verify_messenger_webhook", "verify_messenger_webhook_of_app", "receive_messenger_delivery",
        "receive_messenger_delivery_of_app"],
    body: crate::channels::messenger::payload::NotificationBody,
    described: "A page or instagram notification",
    summary: crate::channels::messenger::DeliverySummary,
    receive: crate::channels::messenger::receive);
