"""Writes ``data.jsonl`` from the hand-written texts and labels below, after checking that
every non-null label value is a verbatim (case-sensitive) substring of its text.

The texts were written for this benchmark; the labels were checked by hand. The person is
the first person each text mentions; a field is null where the text does not state it.
Run ``python benchmarks/extraction_quality/make_data.py`` after editing an entry.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

FIELDS = ("name", "organization", "city", "role")

# (text, name, organization, city, role)
ITEMS: list[tuple[str, str, str | None, str | None, str | None]] = [
    ("Maria Fernández, the new head of marketing at Solvara, will be based in Madrid from "
     "March.", "Maria Fernández", "Solvara", "Madrid", "head of marketing"),
    ("Liam O'Brien joined Dunmore Engineering in Cork last week as a project manager.",
     "Liam O'Brien", "Dunmore Engineering", "Cork", "project manager"),
    ("José Núñez, 41, a lawyer from Valencia, spoke at the conference on Tuesday.",
     "José Núñez", None, "Valencia", "lawyer"),
    ("Zoë Clarke has been promoted to chief financial officer at Harwick & Sons.",
     "Zoë Clarke", "Harwick & Sons", None, "chief financial officer"),
    ("Agnieszka Wójcik, a data analyst at Baltic Freight, lives and works in Łódź.",
     "Agnieszka Wójcik", "Baltic Freight", "Łódź", "data analyst"),
    ("Please welcome Priya Nair, who starts on Monday as our office manager in Leeds.",
     "Priya Nair", None, "Leeds", "office manager"),
    ("Thank you to Henrik Larsen for fixing the printer on the third floor.",
     "Henrik Larsen", None, None, None),
    ("Amara Okafor, chief surgeon at St. Columba's Hospital in Edinburgh, retired on Friday "
     "after 30 years.", "Amara Okafor", "St. Columba's Hospital", "Edinburgh", "chief surgeon"),
    ("The keynote will be given by Kenji Watanabe, a robotics researcher at Hoshino Labs.",
     "Kenji Watanabe", "Hoshino Labs", None, "robotics researcher"),
    ("Hi team, Sophie Martin from the Lyon office of Castellane Media will visit us on 12 May.",
     "Sophie Martin", "Castellane Media", "Lyon", None),
    ("Rafael Costa, 29, from Porto, won the city marathon on Sunday.",
     "Rafael Costa", None, "Porto", None),
    ("Our thanks go to Fatima Zahra, treasurer of the Greenfield Allotment Society, for "
     "organising the spring fair.",
     "Fatima Zahra", "Greenfield Allotment Society", None, "treasurer"),
    ("Olivia Brennan, a nurse at the Manchester-based charity CareBridge, was named volunteer "
     "of the year.", "Olivia Brennan", "CareBridge", "Manchester", "nurse"),
    ("Björn Eriksson will take over as plant manager at Nordvik Steel in Luleå from 1 June.",
     "Björn Eriksson", "Nordvik Steel", "Luleå", "plant manager"),
    ("Email from Chloé Dubois: I've moved to Montréal, so please send the contracts to my new "
     "address.", "Chloé Dubois", None, "Montréal", None),
    ("Marcus Reid, a freelance photographer, captured the storm over the harbour.",
     "Marcus Reid", None, None, "freelance photographer"),
    ("The new espresso machine was installed by Ahmed Hassan, a technician from Brewline "
     "Services.", "Ahmed Hassan", "Brewline Services", None, "technician"),
    ("Tomás Ó Briain works in the finance team at Orbis Insurance's Cardiff headquarters as "
     "an accountant.", "Tomás Ó Briain", "Orbis Insurance", "Cardiff", "accountant"),
    ("Event notice: the poetry reading with Grace Kim starts at 7 pm in the library hall.",
     "Grace Kim", None, None, None),
    ("Product note: the redesigned kettle was developed by engineer Paulo Mendes and his team "
     "at Aquaterm.", "Paulo Mendes", "Aquaterm", None, "engineer"),
    ("Ewa Kowalczyk, a 52-year-old teacher from Kraków, has written her first novel.",
     "Ewa Kowalczyk", None, "Kraków", "teacher"),
    ("We are sad to announce that Daniel Schmidt, our head of IT, is leaving Falkenberg GmbH "
     "after eight years.", "Daniel Schmidt", "Falkenberg GmbH", None, "head of IT"),
    ("Samuel Adeyemi, the mayor of Ibadan, opened the new market on Saturday.",
     "Samuel Adeyemi", None, "Ibadan", "mayor"),
    ("Reminder: Hannah Weiß will lead the first-aid training in Room 4 on Thursday.",
     "Hannah Weiß", None, None, None),
    ('The bakery, known locally as "The Flour Pot", is run by Ines Moreau in Bordeaux.',
     "Ines Moreau", "The Flour Pot", "Bordeaux", None),
    ('Aisha Rahman, senior software engineer at Quillstone, said: "We shipped the update on '
     'time."', "Aisha Rahman", "Quillstone", None, "senior software engineer"),
    ("Yesterday, Mateo García and Lucía Torres opened a bookshop in Seville.",
     "Mateo García", None, "Seville", None),
    ("Ingrid Holm, 47, is the new principal of Eastbrook Primary School in Bergen.",
     "Ingrid Holm", "Eastbrook Primary School", "Bergen", "principal"),
    ("Dear colleagues, I'm Jack Thompson, the new facilities coordinator.",
     "Jack Thompson", None, None, "facilities coordinator"),
    ("The award went to Mei Ling Chen, a pharmacist who has run the Lotus Pharmacy in "
     "Singapore since 2009.", "Mei Ling Chen", "Lotus Pharmacy", "Singapore", "pharmacist"),
    ("Patrick D'Souza, operations lead at Harbourline Ferries, confirmed that the Dover route "
     "will resume on Monday.", "Patrick D'Souza", "Harbourline Ferries", None, "operations lead"),
    ("Lena Vogel, a 31-year-old architect, moved to Hamburg to join Brandt & Keller.",
     "Lena Vogel", "Brandt & Keller", "Hamburg", "architect"),
    ("Our guest speaker, Rohan Mehta, is a cardiologist.",
     "Rohan Mehta", None, None, "cardiologist"),
    ("Anna Lindqvist from Uppsala will chair Thursday's session.",
     "Anna Lindqvist", None, "Uppsala", None),
    ("Sara Haddad has been hired by Meridian Bank's Glasgow branch as a loan officer.",
     "Sara Haddad", "Meridian Bank", "Glasgow", "loan officer"),
    ("Product update from Kai Müller, lead designer: the app now supports dark mode.",
     "Kai Müller", None, None, "lead designer"),
    ("Élodie Laurent, 26, a journalist for Le Quotidien Alpin, lives in Grenoble.",
     "Élodie Laurent", "Le Quotidien Alpin", "Grenoble", "journalist"),
    ("Giorgos Papadakis runs a small fishing business in Chania with his brother.",
     "Giorgos Papadakis", None, "Chania", None),
    ("Sign-up for the charity run closes on Friday; contact Megan Foster at the Hollybrook "
     "Community Centre.", "Megan Foster", "Hollybrook Community Centre", None, None),
    ("Siobhan O'Connell, the receptionist at Kestrel Dental, was born in Galway but now lives "
     "in Limerick.", "Siobhan O'Connell", "Kestrel Dental", "Limerick", "receptionist"),
    ("Nuno Ferreira, 38, of Lisbon, has been named chief executive of Atlântico Energia.",
     "Nuno Ferreira", "Atlântico Energia", "Lisbon", "chief executive"),
    ("Workshop note: please bring your laptops; Ji-woo Park will be the trainer.",
     "Ji-woo Park", None, None, "trainer"),
]  # fmt: skip


def main() -> int:
    out = Path(__file__).with_name("data.jsonl")
    bad = 0
    lines = []
    for text, *values in ITEMS:
        label = dict(zip(FIELDS, values, strict=True))
        for field, value in label.items():
            if value is not None and value not in text:
                print(f"not a substring: {field}={value!r} in {text!r}", file=sys.stderr)
                bad += 1
        lines.append(json.dumps({"text": text, "label": label}, ensure_ascii=False))
    if bad:
        return 1
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    nulls = sum(any(v is None for v in values) for _, *values in ITEMS)
    print(f"wrote {out} ({len(ITEMS)} records, {nulls} with at least one null field)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
