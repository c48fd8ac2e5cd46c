/// Words the generated documents are made of, so bodies look (and compress) like application data rather
/// than random bytes.
enum Vocabulary {
    static let kinds = ["customer", "order", "product", "review", "invoice", "ticket", "shipment", "profile"]

    static let firstNames = [
        "Ada", "Alan", "Amara", "Anders", "Beatriz", "Bruno", "Camille", "Chen", "Dario", "Devi", "Elena",
        "Emeka", "Farah", "Felix", "Grace", "Hana", "Hugo", "Ines", "Ivan", "Jonas", "Julia", "Kai", "Keiko",
        "Lars", "Leila", "Lucas", "Maya", "Mateo", "Nadia", "Nils", "Olga", "Omar", "Paula", "Priya", "Quinn",
        "Rafael", "Rosa", "Sami", "Sofia", "Tariq", "Tess", "Uma", "Victor", "Wen", "Xavier", "Yara", "Zoe",
    ]

    static let lastNames = [
        "Abbott", "Almeida", "Bauer", "Bianchi", "Castillo", "Dubois", "Eriksen", "Fischer", "Garcia", "Haddad",
        "Ito", "Jensen", "Kowalski", "Larsen", "Lindqvist", "Moreau", "Nakamura", "Novak", "Okafor", "Oliveira",
        "Petrov", "Quintero", "Rossi", "Sato", "Schmidt", "Silva", "Tanaka", "Turner", "Ueda", "Varga",
        "Weber", "Wright", "Yilmaz", "Zhang",
    ]

    static let domains = ["example.com", "mail.example.org", "corp.example.net", "shop.example.io"]

    static let cities = [
        "Amsterdam", "Austin", "Barcelona", "Berlin", "Bogota", "Boston", "Cape Town", "Chicago", "Dublin",
        "Helsinki", "Lagos", "Lisbon", "Lyon", "Melbourne", "Montreal", "Nairobi", "Osaka", "Oslo", "Porto",
        "Prague", "Seattle", "Seoul", "Toronto", "Valencia", "Vienna", "Warsaw", "Zurich",
    ]

    static let countries = ["AT", "AU", "BR", "CA", "CH", "CZ", "DE", "ES", "FI", "FR", "IE", "JP", "KE", "KR",
                            "NG", "NL", "NO", "PL", "PT", "US", "ZA"]

    static let streets = [
        "Maple", "Oak", "Cedar", "Harbor", "Mill", "Station", "Church", "River", "Park", "Hill", "Lake",
        "Garden", "Bridge", "Market", "Orchard", "Willow", "Forest", "Meadow", "Canal", "Chapel",
    ]

    static let streetSuffixes = ["Street", "Road", "Lane", "Avenue", "Way", "Court", "Place"]

    static let statuses = ["new", "pending", "active", "shipped", "delivered", "cancelled", "archived"]

    static let tags = [
        "priority", "gift", "wholesale", "returning", "newsletter", "vip", "mobile", "web", "store", "promo",
        "bulk", "fragile", "express", "eco", "imported", "seasonal", "clearance", "subscription",
    ]

    static let words = [
        "the", "a", "and", "of", "to", "in", "for", "with", "on", "was", "is", "it", "that", "very", "not",
        "but", "arrived", "delivery", "package", "quality", "price", "order", "customer", "service", "great",
        "good", "late", "early", "box", "color", "size", "fits", "works", "expected", "again", "would",
        "recommend", "return", "support", "helpful", "quick", "slow", "item", "product", "shipping", "store",
        "online", "friendly", "staff", "replacement", "warranty", "battery", "screen", "fabric", "material",
        "sturdy", "light", "heavy", "small", "large", "perfect", "broken", "damaged", "refund", "week", "day",
        "month", "morning", "evening", "after", "before", "because", "really", "quite", "exactly", "described",
        "instructions", "setup", "easy", "difficult", "value", "money", "happy", "disappointed", "ordered",
        "twice", "first", "second", "time", "team", "call", "email", "update", "tracking", "address", "door",
    ]
}
