//! `GET|POST /webhooks/whatsapp[/{app}]`: Meta's handshake and signed deliveries.

super::meta::meta_webhook!("/webhooks/whatsapp",
    ids: ["verify_default", "verify_app", "receive_default", "receive_app"],
    body: crate::channels::whatsapp::payload::NotificationBody,
    described: "A WhatsApp Business Account notification",
    summary: crate::channels::whatsapp::webhook::DeliverySummary,
    receive: crate::channels::whatsapp::webhook::receive);
