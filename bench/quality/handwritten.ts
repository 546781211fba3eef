/**
 * The hand-written set: three long chats (one API key each) written by hand — two friends, two
 * ex-colleagues, two siblings — and 50 questions whose evidence turns are named by label.
 * Turn ids are `hw/<chat>/<label>` for labelled turns (the evidence) and `hw/<chat>/sNN/tNN`
 * for the rest. The `paraphrase` tag is computed with the generator's keyword check, so it means
 * the same in every set; `rare-token` and `updated` are assigned by hand.
 */
import { sharedKeywords } from './generator';
import type { LabelledSet, QuestionKind, QuestionTag, SetQuestion, SetTurn } from './types';

/** [speaker index, text, label?] */
type T = [0 | 1, string, string?];

interface Session {
  /** Local start time of the session (treated as UTC). */
  at: string;
  turns: T[];
}

interface Chat {
  id: string;
  speakers: [string, string];
  sessions: Session[];
}

interface Q {
  chat: string;
  kind: QuestionKind;
  tags?: Exclude<QuestionTag, 'paraphrase'>[];
  rare?: string;
  q: string;
  evidence: string[];
  answer: string;
}

const s = (at: string, turns: T[]): Session => ({ at, turns });

const CHATS: Chat[] = [
  {
    id: 'dana-ruth',
    speakers: ['Dana', 'Ruth'],
    sessions: [
      s('2023-01-14T19:20', [
        [0, 'Happy new year-ish! Sorry I went quiet, the ward was chaos over the holidays.'],
        [1, "Don't apologise, I know what January is like for you lot. How are you holding up?"],
        [0, 'Six night shifts in a row on the cardiology ward. Twelve years of nursing and nights still wreck me.', 'dana-nurse'],
        [1, 'Twelve years! I still cannot believe you do nights.'],
        [0, 'Somebody has to. How is the new job?'],
        [1, 'Really good actually. I joined a tiny company called Fernwick Labs in December, we build scheduling software for clinics.', 'ruth-fernwick'],
        [0, 'Ha, maybe you can fix our rota system, it was designed in 1997.'],
        [1, "Send me screenshots and I'll cry over them professionally."],
        [0, 'Deal. The boys say hi by the way. Leo lost his first tooth on Tuesday and demanded two pounds from the tooth fairy.', 'dana-leo-tooth'],
        [1, 'Two pounds! Inflation hits everyone.'],
        [0, 'Finn is furious that he has no wobbly teeth yet.'],
        [1, "Tell him it's coming. Anyway, Marco is calling me for dinner, speak soon?"],
        [0, 'Night lovely x'],
      ]),
      s('2023-02-03T12:05', [
        [1, 'Okay I have news. Fernwick wants me to lead the team they are opening in Lisbon.', 'ruth-lisbon-offer'],
        [0, 'LISBON? As in Portugal??'],
        [1, 'As in Portugal. The office opens in the spring and they want someone who knows the product inside out.'],
        [0, 'Are you going to say yes?'],
        [1, 'I think so. My husband Marco is already looking at flats on his phone, which tells you everything.', 'ruth-marco'],
        [0, 'Of course he is. What about your mum though?'],
        [1, "That's the hard part. Mum's hip replacement is booked for the middle of March and I want to be around for it.", 'ruth-mum-booked'],
        [0, "You can fly back, it's two and a half hours."],
        [1, 'True. Okay. I am telling them yes on Monday.'],
        [0, 'Proud of you. Slightly devastated, but proud.'],
        [1, 'You have to visit. There is a spare room with your name on it.'],
      ]),
      s('2023-02-25T09:40', [
        [0, 'Morning! Guess who finally killed the Corsa.'],
        [1, 'Noooo. What happened?'],
        [0, 'The gearbox gave up on the ring road. The mechanic laughed at me. Fifteen years old, it had a good life.', 'dana-corsa'],
        [1, 'RIP little Corsa. What are you going to do for the school run?'],
        [0, "Borrowing my sister's car for now. Dan wants something electric but I'm scared of the prices."],
        [1, 'Look at second hand ones, the resale values are dropping like crazy.'],
        [0, "That's what he said. Also I've been baking every day off, it's becoming a problem."],
        [1, 'A delicious problem. Still doing the cardamom buns?'],
        [0, 'Cardamom buns, cinnamon knots, and a rye sourdough that finally has a proper crust. The neighbours are getting fat.', 'dana-baking'],
        [1, 'Honestly open a shop.'],
        [0, 'Ha. One day.'],
      ]),
      s('2023-03-18T17:30', [
        [1, "Mum's operation went well! The new hip is in and she's already bossing the physios around.", 'ruth-mum-surgery'],
        [0, 'Oh thank god. Give her my love. How long is she in for?'],
        [1, 'Four or five days, then my brother takes her home. I fly out on the 2nd of April.'],
        [0, "So soon! Is everything packed?"],
        [1, 'Nothing is packed. Marco has packed his coffee machine and called it a day.'],
        [0, 'Priorities.'],
        [1, 'How are the boys?'],
        [0, 'Finn has decided he is a dinosaur. Only answers to Stegosaurus now.'],
        [1, 'Iconic. I support him.'],
        [0, 'Also, you will laugh, I signed up for a food hygiene certificate. Just in case.', 'dana-hygiene'],
        [1, 'JUST IN CASE. I see you.'],
      ]),
      s('2023-04-09T20:15', [
        [1, 'Greetings from Lisbon! We got the keys to the flat in Alfama yesterday. It has a tiny balcony and you can see the river.', 'ruth-moved'],
        [0, 'Stop it, that sounds like a film. How is Marco coping with the hills?'],
        [1, 'He has discovered the trams and refuses to walk anywhere.'],
        [0, 'Smart man.'],
        [1, 'The office is nice too, there are seven of us so far. I hired my first developer on Friday.'],
        [0, 'Boss Ruth! How is the language going?'],
        [1, 'Badly. I found a tutor called Inês, we meet on Tuesday evenings and she corrects my pronunciation with a lot of patience.', 'ruth-tutor-tuesday'],
        [0, 'Obrigada is all I know.'],
        [1, "That's already more than Marco."],
        [0, 'Send photos of the balcony please.'],
        [1, 'Sending now. Ignore the laundry.'],
      ]),
      s('2023-05-06T11:00', [
        [0, 'We bought a car!! A second hand Kia Niro, the electric one. Dark blue.', 'dana-kia'],
        [1, 'Look at you going green! Do you like it?'],
        [0, "It's so quiet that I keep thinking it's switched off. The boys call it the spaceship."],
        [1, 'Perfect name.'],
        [0, 'How is Lisbon treating you?'],
        [1, 'Marco dragged me to a fado bar on Thursday and I cried through the whole thing. I am obsessed now, we have been back twice.', 'ruth-fado'],
        [0, 'You cried at a bar? Who are you?'],
        [1, 'It was the singing! It gets into your chest.'],
        [0, "I believe you. Finn cried at a car wash yesterday, so we're all emotional."],
        [1, 'The brushes are scary, to be fair.'],
      ]),
      s('2023-05-27T08:50', [
        [1, 'I did a stupid thing.'],
        [0, 'Tell me everything.'],
        [1, 'I bought a scooter. A mint green 1978 Vespa from an old man in Graça. Marco named it Pistachio.', 'ruth-vespa'],
        [0, 'That is not stupid, that is the best thing you have ever done.'],
        [1, 'It does not like hills. Lisbon is entirely hills.'],
        [0, 'Ah.'],
        [1, 'I push it up most of them. Great for my legs.'],
        [0, 'Speaking of legs, are we still doing the Dales Way in August?'],
        [1, "YES. I've booked the flights home for the 10th. Six days, eighty miles, you and me.", 'dales-plan'],
        [0, 'I have already bought new boots. I am breaking them in at work.'],
        [1, 'Nurse in hiking boots. Very practical.'],
      ]),
      s('2023-06-24T21:10', [
        [0, 'Okay, big decision made. I am going part time at the hospital from July.', 'dana-parttime'],
        [1, 'Whoa! Because of the baking?'],
        [0, 'Because of the baking. I got a stall at Kirkgate Market on Saturdays. Crumb and Kettle: bread, buns and proper tea.', 'dana-stall'],
        [1, 'CRUMB AND KETTLE. I am screaming. I told you to open a shop!'],
        [0, "It's a stall, not a shop. But yes. You did."],
        [1, 'First Saturday?'],
        [0, 'The 8th of July. I am terrified. I have to make two hundred buns.'],
        [1, 'You have made two hundred buns for your neighbours already.'],
        [0, 'Fair point.'],
        [1, 'Marco says he wants a cardamom bun posted to Lisbon.'],
        [0, 'They will arrive as crumbs but he can have them.'],
      ]),
      s('2023-07-09T18:45', [
        [0, 'Sold out by 1pm!!!', 'dana-first-market'],
        [1, 'WHAT. On the first day?'],
        [0, 'The first day. The rye went first, then the cardamom buns. A man bought twelve knots for his office.'],
        [1, "I'm so proud I could cry. Actually I am crying, but I'm also at a fado bar so it could be either."],
        [0, 'Haha. How is Pistachio?'],
        [1, 'In the garage. Something with the clutch. The mechanic shrugs a lot.'],
        [0, 'Vintage life.'],
        [1, 'Oh, I moved my Portuguese lessons to Thursdays, Tuesdays kept clashing with team calls.', 'ruth-tutor-thursday'],
        [0, 'How is it going?'],
        [1, 'I can now order coffee and complain about the weather. Fully integrated.'],
      ]),
      s('2023-08-19T19:30', [
        [0, 'My feet still hurt and it has been three days.'],
        [1, 'Mine are still in Yorkshire somewhere. Best week of the year though.'],
        [0, 'Eighty miles from Ilkley to Bowness in six days and we only got lost twice.', 'dales-done'],
        [1, 'Three times. You are forgetting the cows.'],
        [0, 'We agreed never to speak of the cows.'],
        [1, 'Fair. Same time next year? The Cotswold Way?'],
        [0, 'Only if the pubs are as good.'],
        [1, 'Deal.'],
        [0, 'Also a doctor on the ward wants to order bread for the whole department every Friday.'],
        [1, 'Crumb and Kettle goes corporate!'],
      ]),
      s('2023-10-02T13:25', [
        [0, 'Ugh, small drama. I had a reaction to the antibiotics the GP gave me for my chest infection.'],
        [1, 'Oh no, are you okay?'],
        [0, 'Hives everywhere. Turns out I am allergic to penicillin, which I somehow never knew at 41.', 'dana-penicillin'],
        [1, 'Scary! Make sure it is on your records.'],
        [0, 'It is now in big red letters.'],
        [1, 'Good. Listen, Marco and I are thinking of staying in Lisbon for good.'],
        [0, 'I knew it. I knew it the moment he found the trams.'],
        [1, 'Fernwick offered me a permanent contract and we are looking at buying a place.'],
        [0, 'Then I am coming to visit in the spring and you are taking me to the fado bar.'],
        [1, 'Tissues provided.'],
      ]),
    ],
  },
  {
    id: 'tomas-wen',
    speakers: ['Tomás', 'Wen'],
    sessions: [
      s('2023-01-21T10:10', [
        [0, 'Wen! How was the first week back?'],
        [1, 'Exhausting. The pilot units arrived broken, half of them do not turn on.'],
        [0, 'The air sensors?'],
        [1, 'Yes, the LX-40. We are putting them in twelve classrooms to measure CO2 and they are dead on arrival.', 'wen-lx40'],
        [0, 'Oof. Is it the firmware?'],
        [1, 'The battery connector. Cheap part, expensive mistake. Lumora is three people, we cannot afford this.', 'wen-lumora'],
        [0, 'You will fix it, you always do.'],
        [1, "Thanks. How's the training?"],
        [0, 'I signed up for the Berlin Marathon in September. There is no going back now.', 'tomas-marathon-signup'],
        [1, 'You absolute madman. Your first one?'],
        [0, 'First one. I run four times a week now, long run on Sundays.'],
        [1, 'I get tired walking to the U-Bahn.'],
      ]),
      s('2023-02-11T16:30', [
        [1, 'Meet Tofu!!! She is a grey tabby from the Tierheim and she already sleeps on my keyboard.', 'wen-tofu'],
        [0, 'NO. Photos immediately.'],
        [1, 'Sent. She is tiny and hates the vacuum.'],
        [0, 'She has excellent taste.'],
        [1, 'How are the kids at school?'],
        [0, 'Year 11 blew up a test tube on Thursday. Nobody hurt, but the smell is still in the lab.', 'tomas-teacher'],
        [1, 'Chemistry teacher life.'],
        [0, 'Honestly I love them. Even the ones who set things on fire.'],
        [1, 'Especially those ones.'],
        [0, 'Shall we get dumplings next week?'],
        [1, 'Yes, but not the spicy place. I still have not recovered.'],
      ]),
      s('2023-03-04T19:00', [
        [0, 'Are you around? I need apartment advice.'],
        [1, 'Always. What happened?'],
        [0, 'My landlord is selling the flat in Moabit. I have until June to find something.'],
        [1, 'Oh no, the Berlin flat hunt. My condolences.'],
        [0, 'Thirty people at every viewing. One guy brought a cake for the landlord.'],
        [1, 'The cake strategy. Did it work?'],
        [0, 'He got it. I should have brought a cake.'],
        [1, 'I bring the cake next time, you bring the documents.'],
        [0, 'Deal. How is your place in Kreuzberg?'],
        [1, 'Loud, tiny, I love it. Tofu has claimed the windowsill.', 'wen-kreuzberg'],
        [0, 'Lucky cat.'],
      ]),
      s('2023-03-25T12:40', [
        [1, 'We fixed the LX-40! New connectors from a supplier in Shenzhen, all twelve units are running.'],
        [0, 'Yes!! Told you.'],
        [1, 'The school in Halden wants forty more if the pilot works.'],
        [0, "That's huge. Are you fundraising?"],
        [1, 'Trying. Investors all want a bigger team first. It is a chicken and egg thing.'],
        [0, 'My sister says the same about the hospital, everyone wants experience before giving you experience.', 'tomas-sister'],
        [1, 'How is Carla?'],
        [0, 'Still in Porto, she just finished her residency. She is officially a paediatrician now.', 'tomas-carla-doctor'],
        [1, 'Wow! Tell her congratulations from me.'],
        [0, 'She will be happy, she still talks about your dumplings from the summer.'],
      ]),
      s('2023-04-22T08:15', [
        [1, 'Ohayo from Kyoto! Mum, Dad and I arrived yesterday. The cherry blossoms are a bit late so we are lucky.', 'wen-kyoto'],
        [0, 'Amazing! First time for your parents?'],
        [1, 'First time for all of us. Dad has already eaten four kinds of tofu and named none of them after my cat.'],
        [0, 'Tragic oversight.'],
        [1, 'We walked up Fushimi Inari this morning, ten thousand gates and my legs are jelly.'],
        [0, 'Good marathon training for you.'],
        [1, 'Never. How is the flat hunt?'],
        [0, 'I got one! A two room place in Wedding. Smaller kitchen but a balcony. I move on the 1st of June.', 'tomas-wedding-flat'],
        [1, 'Finally!!! Did you bring a cake?'],
        [0, 'I brought a very serious folder with every document I own.'],
      ]),
      s('2023-05-20T20:05', [
        [1, 'We closed the seed round!!!! 1.2 million, led by a fund from Copenhagen.', 'wen-seed'],
        [0, 'WEN. That is massive. Celebration dumplings on me.'],
        [1, 'I can hire two engineers now. I might actually sleep.'],
        [0, 'You will not sleep, you will just worry about new things.'],
        [1, 'Accurate. How is your leg?'],
        [0, 'Not great. The physio says shin splints. No running for three weeks, only cycling and swimming.', 'tomas-shins'],
        [1, 'Oh no! Will you be ready for September?'],
        [0, 'If I behave. I am bad at behaving.'],
        [1, 'I will send Tofu to supervise you.'],
      ]),
      s('2023-06-10T15:20', [
        [0, 'Moving day survived. Everything I own is in boxes in Wedding.'],
        [1, 'Congrats on the new place! Need help unpacking?'],
        [0, 'Desperately. Also I have news. I am leaving the school at the end of term.', 'tomas-leaving-school'],
        [1, 'What? I thought you loved it.'],
        [0, 'I do, but a lab company called Quantira offered me a job as an analytical chemist. Double the money, no marking.', 'tomas-quantira'],
        [1, 'No marking is worth a lot.'],
        [0, 'The kids made me a card with a drawing of me on fire. I cried a bit.'],
        [1, 'Of course they did. Of course you did.'],
        [0, 'Bring pizza when you come help.'],
        [1, 'Pizza and box cutters. Saturday?'],
      ]),
      s('2023-07-15T18:00', [
        [1, 'Question. Would you come to a board game night at mine next Friday? I have a new obsession.'],
        [0, 'Which game?'],
        [1, 'Every game. I have eleven board games now. I play one with the team every Friday, it is my favourite part of the week.', 'wen-boardgames'],
        [0, 'Eleven! Okay yes, but I am bad at strategy.'],
        [1, 'Perfect, I like winning.'],
        [0, 'Honest as always. Also, Carla wants me to do a hot air balloon ride in Porto for her birthday.'],
        [1, 'That sounds amazing!'],
        [0, 'It sounds like death. I get dizzy on a stepladder. I nearly fainted on the Fernsehturm.', 'tomas-heights'],
        [1, 'Okay, maybe a nice lunch for her birthday instead.'],
        [0, 'Much safer.'],
      ]),
      s('2023-08-05T11:45', [
        [1, 'Tofu has a sister!! Meet Miso, another little tabby from the Tierheim.', 'wen-miso'],
        [0, 'Two cats in Kreuzberg! How are they getting on?'],
        [1, 'Lots of hissing, some stealing of food, currently asleep in the same box.'],
        [0, 'Sounds like siblings.'],
        [1, "How's the new job?"],
        [0, 'Strange to have lunch breaks. I keep waiting for a bell to ring.'],
        [1, 'And running?'],
        [0, 'Back to full training. 32 kilometres last Sunday without pain.'],
        [1, 'Legend.'],
      ]),
      s('2023-09-24T21:30', [
        [0, 'I DID IT. 3 hours 41 minutes. I cannot feel anything below my waist.', 'tomas-marathon-done'],
        [1, 'TOMÁS!!! I saw you at kilometre 35, you looked like a ghost.'],
        [0, 'I was a ghost. Your sign was the only reason I kept going.'],
        [1, '"Run like Tofu saw the vacuum." A classic.'],
        [0, 'Carla flew in from Porto to watch, she cried more than me.'],
        [1, 'Family trait.'],
        [0, 'Never again. Well. Maybe Copenhagen next year.'],
        [1, 'Of course.'],
      ]),
      s('2023-10-28T13:10', [
        [1, 'Okay, bad news. I got food poisoning from the prawn curry at the Thai place.'],
        [0, 'Oh no! Are you okay?'],
        [1, 'The doctor says it is not poisoning. I am allergic to shellfish. Apparently it can start as an adult.', 'wen-shellfish'],
        [0, 'That is so unfair. No more prawn curry.'],
        [1, 'No more prawns, crabs or mussels. Goodbye paella.'],
        [0, 'The dumpling place has vegetable ones at least.'],
        [1, 'The dumpling place remains safe. Thank god.'],
        [0, 'Friday?'],
        [1, 'Friday. Bring your game face, it is board game night after.'],
      ]),
    ],
  },
  {
    id: 'priya-sam',
    speakers: ['Priya', 'Sam'],
    sessions: [
      s('2023-01-08T18:30', [
        [1, "Happy new year sis! How's the wedding planning?"],
        [0, 'Stressful and wonderful. We booked the venue! Prior Park in Bath, Saturday the 14th of October.', 'priya-venue'],
        [1, 'Prior Park! Fancy. Mum is going to lose her mind.'],
        [0, 'She already has. She sent me forty pictures of hats.'],
        [1, 'And Jonah?'],
        [0, 'Jonah only cares about the cake. He wants a lemon cake with three tiers.'],
        [1, 'A man of simple needs.'],
        [0, "How's school?"],
        [1, "Year 4 are feral after the holidays. We're doing the Romans this term, so lots of shields made of cardboard.", 'sam-teacher'],
        [0, 'You love it though.'],
        [1, 'I do. Even the glue sticks.'],
      ]),
      s('2023-02-12T09:20', [
        [1, 'Do not panic but I had a crash yesterday.'],
        [0, 'WHAT. Are you okay??'],
        [1, "I'm fine. Someone went into the back of my Fiesta at the roundabout by the Tesco. The bumper is hanging off.", 'sam-crash'],
        [0, 'Oh my god. Did they stop?'],
        [1, 'They did, very apologetic. The insurance claim number is CLM-88213 in case Dad asks, he will want to deal with it.', 'sam-claim'],
        [0, 'He will absolutely want to deal with it.'],
        [1, 'Mango was in the back and he did not even wake up.'],
        [0, 'Greyhounds are built different.'],
        [1, 'He is a professional napper.'],
      ]),
      s('2023-03-05T20:00', [
        [0, 'Can we talk about Dad?'],
        [1, 'Yes. Did he tell you what the cardiologist said?'],
        [0, 'Only that it was "nothing". Mum says otherwise.'],
        [1, 'One of the arteries is narrowed. They want to put in a stent in May. It is a routine procedure apparently.', 'dad-stent-plan'],
        [0, 'Why does he never tell me anything?'],
        [1, 'He does not want to stress you before the wedding.'],
        [0, 'Being kept in the dark stresses me more!'],
        [1, 'I know. Call him tonight, he will tell you if you ask directly.'],
        [0, 'Okay. Thank you for telling me.'],
      ]),
      s('2023-03-26T14:15', [
        [0, 'New job news! I accepted the offer from Halvard & Pike. Senior UX researcher, starting in April.', 'priya-halvard'],
        [1, 'Congrats!!! The design agency in Clifton?'],
        [0, 'That one. Fewer meetings, nicer coffee, and I can walk there.'],
        [1, 'Nicer coffee is a valid reason to change jobs.'],
        [0, 'The most valid reason. How is Mango?'],
        [1, 'He ate a whole baguette off the counter yesterday and then looked at me like I had done it.', 'sam-mango'],
        [0, 'A criminal mastermind.'],
        [1, 'Rescue greyhounds do not care about rules.'],
        [0, 'Also I need your help with the playlist for the wedding.'],
        [1, 'I accept this great honour.'],
      ]),
      s('2023-04-16T19:45', [
        [0, 'Disaster. The venue double booked our date.'],
        [1, 'Nooo. What happens now?'],
        [0, 'They apologised and offered us the 21st of October instead, same price plus free wine. We said yes.', 'priya-new-date'],
        [1, 'Free wine sounds like a win honestly.'],
        [0, 'Mum had to re-book her hat fitting.'],
        [1, 'The hat fitting! A tragedy.'],
        [0, 'I have to send new save the dates to 120 people.'],
        [1, 'Send them a meme, nobody reads the card anyway.'],
        [0, 'You are not helping.'],
        [1, 'I am helping emotionally.'],
      ]),
      s('2023-05-18T17:10', [
        [1, 'Dad is home from the hospital. The stent went in yesterday and he is already complaining about the food.', 'dad-stent-done'],
        [0, 'Oh thank god. Is he okay?'],
        [1, 'He is fine. The heart specialist says he has to walk every day and cut out salt.'],
        [0, 'Dad without salt. Poor Mum.'],
        [1, 'She hid the salt in the garage.'],
        [0, 'Good. How is school?'],
        [1, "Actually, I have news. I'm going to be deputy head from September.", 'sam-deputy'],
        [0, 'SAM! That is amazing.'],
        [1, 'Less teaching, more spreadsheets. I will miss my Year 4s.'],
        [0, 'You will still see them in the corridors.'],
      ]),
      s('2023-06-17T11:30', [
        [0, 'Wedding menu tasting today. Jonah ate three desserts.'],
        [1, 'What is on the menu?'],
        [0, 'Everything is plant based. You know I have been vegan for six years, I am not paying for a lamb I would not eat.', 'priya-vegan'],
        [1, 'Fair. Will there be a cheese board for Dad at least?'],
        [0, 'Cashew cheese. He will not notice.'],
        [1, 'He will notice and he will complain.'],
        [0, 'He complains about everything. It is his hobby.'],
        [1, 'Speaking of hobbies, my band the Damp Squibs has a gig at the Louisiana next month. I play bass, so nobody will look at me, which is perfect.', 'sam-bass'],
        [0, 'The Damp Squibs live! I will be there, front row.'],
      ]),
      s('2023-07-22T22:05', [
        [1, "Mum's 60th surprise party was a success. She cried when she walked into the Olive Tree.", 'mum-party'],
        [0, 'She had no idea?'],
        [1, 'None! Dad kept it secret, which is a miracle given he tells everyone everything.'],
        [0, 'Except about his own heart.'],
        [1, 'Except that.'],
        [0, 'Photos please. I will be sad forever that I had the flu.'],
        [1, 'Sending. Mango wore a bow tie.'],
        [0, 'The bow tie is everything.'],
        [1, 'Gig went well too by the way. We played eleven songs and only messed up two.'],
      ]),
      s('2023-09-02T10:00', [
        [0, 'Week one at Halvard & Pike with a full team. I am running interviews with forty users this month.'],
        [1, 'Sounds intense.'],
        [0, "It is great. How's the deputy head life?"],
        [1, 'So many spreadsheets. I also took over the climbing club on Wednesdays, the kids are braver than me.', 'sam-climbing'],
        [0, 'You love climbing though.'],
        [1, "I do, I go bouldering every weekend. But watching ten year olds on a wall is terrifying."],
        [0, 'Forty days to the wedding.'],
        [1, 'I know. The speech is written. Mostly. In my head.'],
        [0, 'SAM.'],
        [1, 'Joking. Half of it is on paper.'],
      ]),
      s('2023-10-22T12:00', [
        [0, 'I am married!!!', 'priya-married'],
        [1, 'Best day. Your face when Jonah started crying during the vows.', 'jonah-vows'],
        [0, 'He cried through the whole ceremony. And the lemon cake was perfect.'],
        [1, 'Three tiers as promised.'],
        [0, 'Dad danced for two hours. With a stent!'],
        [1, 'He told everyone about the stent. Everyone.'],
        [0, 'Of course he did. Thank you for the speech, people would not stop talking about the cardboard shields story.'],
        [1, 'Year 4 would be proud.'],
        [0, 'Honeymoon in Sri Lanka next week. I will send elephants.'],
        [1, 'Send all the elephants.'],
      ]),
    ],
  },
];

const QUESTIONS: Q[] = [
  // Dana & Ruth
  { chat: 'dana-ruth', kind: 'single-hop', q: 'What does Dana do for a living?', evidence: ['dana-nurse'], answer: 'nurse on a cardiology ward' },
  { chat: 'dana-ruth', kind: 'single-hop', tags: ['rare-token'], rare: 'Fernwick', q: 'What does Fernwick Labs build?', evidence: ['ruth-fernwick'], answer: 'scheduling software for clinics' },
  { chat: 'dana-ruth', kind: 'single-hop', tags: ['updated'], q: 'Which city does Ruth live in now?', evidence: ['ruth-moved'], answer: 'Lisbon' },
  { chat: 'dana-ruth', kind: 'temporal', q: "When did Ruth's mum have her hip operation?", evidence: ['ruth-mum-surgery'], answer: 'March 2023 (around 18 March)' },
  { chat: 'dana-ruth', kind: 'single-hop', q: "What is the name of Ruth's husband?", evidence: ['ruth-marco'], answer: 'Marco' },
  { chat: 'dana-ruth', kind: 'single-hop', q: 'What automobile does Dana own these days?', tags: ['updated'], evidence: ['dana-kia'], answer: 'a second-hand electric Kia Niro' },
  { chat: 'dana-ruth', kind: 'multi-hop', q: 'What car did Dana have before the electric one, and what happened to it?', evidence: ['dana-corsa', 'dana-kia'], answer: 'a Corsa whose gearbox died' },
  { chat: 'dana-ruth', kind: 'open-domain', q: 'Would Ruth enjoy an evening of traditional Portuguese singing?', evidence: ['ruth-fado'], answer: 'yes, she loves fado' },
  { chat: 'dana-ruth', kind: 'single-hop', q: 'What motorbike did Ruth get after relocating?', evidence: ['ruth-vespa'], answer: 'a mint green 1978 Vespa named Pistachio' },
  { chat: 'dana-ruth', kind: 'single-hop', tags: ['rare-token'], rare: 'Kirkgate', q: 'What does Dana sell at Kirkgate Market?', evidence: ['dana-stall'], answer: 'bread, buns and tea (Crumb and Kettle)' },
  { chat: 'dana-ruth', kind: 'temporal', q: "When was the first day of Dana's market stall?", evidence: ['dana-first-market'], answer: '8 July 2023' },
  { chat: 'dana-ruth', kind: 'multi-hop', q: 'Which long-distance walk did Dana and Ruth do together, and how far was it?', evidence: ['dales-plan', 'dales-done'], answer: 'the Dales Way, eighty miles in six days' },
  { chat: 'dana-ruth', kind: 'single-hop', tags: ['updated'], q: 'On which day does Ruth have Portuguese lessons now?', evidence: ['ruth-tutor-thursday'], answer: 'Thursdays' },
  { chat: 'dana-ruth', kind: 'open-domain', q: 'Should a GP prescribe Dana amoxicillin?', evidence: ['dana-penicillin'], answer: 'no, she is allergic to penicillin' },
  { chat: 'dana-ruth', kind: 'multi-hop', q: 'Why did Dana reduce her hours at the hospital?', evidence: ['dana-parttime', 'dana-stall'], answer: 'to run her baking stall on Saturdays' },
  { chat: 'dana-ruth', kind: 'temporal', q: 'What did Dana do in August 2023?', evidence: ['dales-done'], answer: 'walked the Dales Way with Ruth' },
  { chat: 'dana-ruth', kind: 'single-hop', q: "What happened to Dana's eldest child's tooth?", evidence: ['dana-leo-tooth'], answer: 'Leo lost his first tooth' },
  // Tomás & Wen
  { chat: 'tomas-wen', kind: 'single-hop', tags: ['rare-token'], rare: 'LX-40', q: 'What does the LX-40 measure?', evidence: ['wen-lx40'], answer: 'CO2 in classrooms' },
  { chat: 'tomas-wen', kind: 'multi-hop', tags: ['rare-token'], rare: 'Lumora', q: 'What product is Lumora piloting in schools?', evidence: ['wen-lumora', 'wen-lx40'], answer: 'the LX-40 air sensor' },
  { chat: 'tomas-wen', kind: 'single-hop', q: "What is the name of Wen's first feline?", evidence: ['wen-tofu'], answer: 'Tofu' },
  { chat: 'tomas-wen', kind: 'multi-hop', q: 'How many cats does Wen have and what are they called?', evidence: ['wen-tofu', 'wen-miso'], answer: 'two: Tofu and Miso' },
  { chat: 'tomas-wen', kind: 'temporal', q: 'When did Tomás run the Berlin Marathon, and in what time?', evidence: ['tomas-marathon-done'], answer: '24 September 2023, 3:41' },
  { chat: 'tomas-wen', kind: 'single-hop', q: 'What injury interrupted Tomás’s training?', evidence: ['tomas-shins'], answer: 'shin splints' },
  { chat: 'tomas-wen', kind: 'multi-hop', q: "What does Tomás's sister do, and where?", evidence: ['tomas-sister', 'tomas-carla-doctor'], answer: 'Carla is a paediatrician in Porto' },
  { chat: 'tomas-wen', kind: 'single-hop', tags: ['updated'], q: 'Where does Tomás work now?', evidence: ['tomas-quantira'], answer: 'Quantira, as an analytical chemist' },
  { chat: 'tomas-wen', kind: 'single-hop', q: 'What subject did Tomás teach?', evidence: ['tomas-teacher'], answer: 'chemistry' },
  { chat: 'tomas-wen', kind: 'temporal', q: 'When did Wen visit Kyoto, and with whom?', evidence: ['wen-kyoto'], answer: 'April 2023 (around 21–22 April), with her parents' },
  { chat: 'tomas-wen', kind: 'single-hop', tags: ['updated'], q: 'Which neighbourhood did Tomás move to?', evidence: ['tomas-wedding-flat'], answer: 'Wedding' },
  { chat: 'tomas-wen', kind: 'temporal', q: "When did Wen's startup close its seed round?", evidence: ['wen-seed'], answer: 'May 2023 (around 20 May)' },
  { chat: 'tomas-wen', kind: 'open-domain', q: 'Would Tomás enjoy a hot air balloon ride?', evidence: ['tomas-heights'], answer: 'no, he is scared of heights' },
  { chat: 'tomas-wen', kind: 'open-domain', q: 'Would a tabletop strategy evening appeal to Wen?', evidence: ['wen-boardgames'], answer: 'yes, she is obsessed with board games' },
  { chat: 'tomas-wen', kind: 'open-domain', q: 'Is paella a safe dish to cook for Wen?', evidence: ['wen-shellfish'], answer: 'no, she is allergic to shellfish' },
  { chat: 'tomas-wen', kind: 'single-hop', q: 'Which district of Berlin does Wen live in?', evidence: ['wen-kreuzberg'], answer: 'Kreuzberg' },
  // Priya & Sam
  { chat: 'priya-sam', kind: 'single-hop', tags: ['updated'], q: "On what date was Priya's wedding finally held?", evidence: ['priya-new-date'], answer: '21 October 2023' },
  { chat: 'priya-sam', kind: 'multi-hop', q: "Where did Priya's wedding take place, and why did the date change?", evidence: ['priya-venue', 'priya-new-date'], answer: 'Prior Park in Bath; the venue double booked the 14th' },
  { chat: 'priya-sam', kind: 'single-hop', tags: ['rare-token'], rare: 'CLM-88213', q: 'What is claim CLM-88213 about?', evidence: ['sam-claim'], answer: "the crash in Sam's Fiesta at a roundabout" },
  { chat: 'priya-sam', kind: 'temporal', q: "When was Sam's car rear-ended?", evidence: ['sam-crash'], answer: 'February 2023 (the day before 12 February)' },
  { chat: 'priya-sam', kind: 'single-hop', q: 'What did the heart doctor find wrong with Priya and Sam’s father?', evidence: ['dad-stent-plan'], answer: 'a narrowed artery needing a stent' },
  { chat: 'priya-sam', kind: 'temporal', q: 'When did their dad get his stent?', evidence: ['dad-stent-done'], answer: '17 May 2023' },
  { chat: 'priya-sam', kind: 'single-hop', tags: ['rare-token'], rare: 'Halvard', q: 'What role did Priya take at Halvard & Pike?', evidence: ['priya-halvard'], answer: 'senior UX researcher' },
  { chat: 'priya-sam', kind: 'single-hop', q: 'What breed is Sam’s pet?', evidence: ['sam-mango'], answer: 'a rescue greyhound' },
  { chat: 'priya-sam', kind: 'single-hop', tags: ['updated'], q: "What is Sam's position at school from September?", evidence: ['sam-deputy'], answer: 'deputy head' },
  { chat: 'priya-sam', kind: 'open-domain', q: 'Would Priya order a lamb shank at a restaurant?', evidence: ['priya-vegan'], answer: 'no, she has been vegan for six years' },
  { chat: 'priya-sam', kind: 'single-hop', tags: ['rare-token'], rare: 'Squibs', q: 'What instrument does Sam play in the Damp Squibs?', evidence: ['sam-bass'], answer: 'bass' },
  { chat: 'priya-sam', kind: 'temporal', q: "Where and when was Mum's 60th birthday party?", evidence: ['mum-party'], answer: 'the Olive Tree, July 2023 (around 22 July)' },
  { chat: 'priya-sam', kind: 'open-domain', q: 'Would Sam enjoy an indoor rock wall session?', evidence: ['sam-climbing'], answer: 'yes, he goes bouldering every weekend' },
  { chat: 'priya-sam', kind: 'single-hop', q: 'What year group did Sam teach?', evidence: ['sam-teacher'], answer: 'Year 4' },
  { chat: 'priya-sam', kind: 'temporal', q: 'When did Priya get married?', evidence: ['priya-married'], answer: '21 October 2023' },
  { chat: 'priya-sam', kind: 'multi-hop', q: 'Which hobbies does Sam have outside school?', evidence: ['sam-bass', 'sam-climbing'], answer: 'playing bass in a band and bouldering' },
  { chat: 'priya-sam', kind: 'single-hop', q: "Who is Priya's spouse?", evidence: ['jonah-vows'], answer: 'Jonah' },
];

/** The hand-written set, with turn ids, dates and the computed paraphrase tags. */
export function handwrittenSet(): LabelledSet {
  const turns: SetTurn[] = [];
  const byLabel = new Map<string, SetTurn>();
  for (const chat of CHATS) {
    const chatId = `hw/${chat.id}`;
    chat.sessions.forEach((sess, si) => {
      const start = Date.parse(`${sess.at}:00Z`);
      sess.turns.forEach(([who, text, label], ti) => {
        const speaker = chat.speakers[who];
        const id = label ? `${chatId}/${label}` : `${chatId}/s${String(si).padStart(2, '0')}/t${String(ti).padStart(2, '0')}`;
        const turn: SetTurn = { id, chat: chatId, session: si, speaker, content: `${speaker}: ${text}`, date: sess.at.slice(0, 10), createdAt: new Date(start + ti * 55_000).toISOString() };
        if (label) {
          if (byLabel.has(`${chat.id}:${label}`)) throw new Error(`duplicate label ${label}`);
          byLabel.set(`${chat.id}:${label}`, turn);
        }
        turns.push(turn);
      });
    });
  }
  const questions: SetQuestion[] = QUESTIONS.map((q, i) => {
    const chat = CHATS.find((c) => c.id === q.chat)!;
    const ev = q.evidence.map((l) => {
      const t = byLabel.get(`${q.chat}:${l}`);
      if (!t) throw new Error(`question "${q.q}" names unknown evidence ${l}`);
      return t;
    });
    const speakers = new Set(chat.speakers.flatMap((n) => [n.toLowerCase(), n.normalize('NFKD').replace(/\p{M}/gu, '').toLowerCase()]));
    const tags = new Set<QuestionTag>(q.tags ?? []);
    if (sharedKeywords(q.q, ev.map((t) => t.content), speakers).length === 0) tags.add('paraphrase');
    if (q.rare && !(q.q.includes(q.rare) && ev.some((t) => t.content.includes(q.rare!)))) throw new Error(`rare token ${q.rare} missing in "${q.q}" or its evidence`);
    return {
      id: `hw/q${String(i).padStart(2, '0')}`,
      chat: `hw/${q.chat}`,
      kind: q.kind,
      tags: [...tags].sort(),
      question: q.q,
      evidence: ev.map((t) => t.id),
      answer: q.answer,
      ...(q.rare ? { rareToken: q.rare } : {}),
    };
  });
  return {
    name: 'handwritten',
    description: `${CHATS.length} hand-written chats (friends, ex-colleagues, siblings) over ten months and 50 hand-written questions`,
    seed: null,
    chats: CHATS.map((c) => ({ id: `hw/${c.id}`, speakers: c.speakers, sessions: c.sessions.length })),
    turns,
    questions,
  };
}
